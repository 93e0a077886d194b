//! Proving knowledge of the token without sending it: HMAC-SHA-256 challenge-response, the relay
//! proving first.
//!
//! A page that reconnects cannot know that whatever answers on the relay's port is the relay: if
//! the relay is down (a restart, an upgrade, a crash), another local user may have bound its
//! port. So the page never sends the token. It sends a fresh random nonce; the relay answers with
//! a nonce of its own and `HMAC(token, "tern-relay-proof" | page nonce | relay nonce)`; only a
//! party that knows the token can compute it, and the page sends nothing else (no session id, no
//! screen, no keys) until it checks. Then the page proves itself with the same HMAC under another
//! label, so a relay's proof can never be replayed as a page's, nor the other way round.
//!
//! ```text
//!  control stream:  page ─ greet{protocol, nonce: P} ─▶ relay
//!                   page ◀─ challenge{nonce: R, proof: relay_proof(P, R)} ─ relay
//!                   page ─ hello{proof: page_proof(P, R), mode, resume, …} ─▶ relay
//!  pushed (WebTransport):  CONNECT …?greet=P ─▶ relay, which accepts the session and at once
//!                   page ◀─ challenge{nonce: R, proof: relay_proof(P, R)} ─ relay (uni stream)
//!                   page ─ hello{proof: page_proof(P, R), …} ─▶ relay (control stream)
//!  HTTP API:        POST /api/challenge {nonce: P} ▶ {nonce: R, proof: relay_proof(P, R)}
//!                   then the request with `Authorization: Tern R.page_proof(P, R)` (R once)
//! ```
//!
//! The same token-derived HMAC also gives the key that seals what a tab keeps in the browser's
//! storage ([`storage_key`]), so another page of the same origin reads nothing useful there.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256 as Sha256Hasher};

use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;
use super::sha256::Sha256;

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256Hasher::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256Hasher::new();
    inner.update(block.map(|b| b ^ 0x36));
    for part in message {
        inner.update(part);
    }
    let mut outer = Sha256Hasher::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// 32 bytes on the wire as 64 lowercase hex digits (the protocol's one hex form,
/// [`Sha256`]'s).
macro_rules! hex32 {
    ($name:ident, $what:literal) => {
        impl FromStr for $name {
            type Err = super::sha256::NotSha256;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                text.parse::<Sha256>().map(|d| $name(d.0))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                Sha256(self.0).fmt(f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($what, "({})"), self)
            }
        }
    };
}

/// A fresh random challenge nonce (one side's share). Not secret; never reused.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProofNonce(pub [u8; 32]);
hex32!(ProofNonce, "ProofNonce");

/// An HMAC proof that its sender knows the token, bound to both nonces.
#[derive(Clone, Copy)]
pub struct Proof(pub [u8; 32]);
hex32!(Proof, "Proof");

impl Proof {
    /// Constant-time comparison: the time taken does not say how many bytes matched.
    pub fn matches(&self, other: &Proof) -> bool {
        self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// Which side proves: the labels keep one side's proof from ever counting as the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prover {
    Relay,
    Page,
}

impl Prover {
    fn label(self) -> &'static [u8] {
        match self {
            Prover::Relay => b"tern-relay-proof\0",
            Prover::Page => b"tern-page-proof\0",
        }
    }
}

/// `prover`'s proof of `token` over the page's and the relay's nonces.
pub fn prove(token: &str, prover: Prover, page: &ProofNonce, relay: &ProofNonce) -> Proof {
    prove_with_key(&proof_key(token), prover, page, relay)
}

/// `prover`'s proof under the HMAC key [`proof_key`] gives: what a relay that keeps only a named
/// token's [`verifier`] computes.
pub fn prove_with_key(key: &[u8], prover: Prover, page: &ProofNonce, relay: &ProofNonce) -> Proof {
    Proof(hmac_sha256(key, &[prover.label(), &page.0, &relay.0]))
}

/// A named token (`tern-relay token add`) reads `tn.ID.SECRET`: ID is [`TOKEN_ID_LEN`] lowercase
/// hex digits, not secret, which a page sends so that the relay knows whose key to prove with;
/// SECRET is 32 random bytes in URL-safe base64. The owner's token (`--token`, the random one)
/// has any other form and no id.
pub const NAMED_TOKEN_PREFIX: &str = "tn.";
/// Hex digits in a named token's id.
pub const TOKEN_ID_LEN: usize = 12;

/// Whether `text` has a named token id's form (a relay looks up nothing else).
pub fn is_token_id(text: &str) -> bool {
    text.len() == TOKEN_ID_LEN && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The id of a named token; `None` for the owner's token (any other form).
pub fn token_id(token: &str) -> Option<&str> {
    let (id, secret) = token.strip_prefix(NAMED_TOKEN_PREFIX)?.split_once('.')?;
    (is_token_id(id) && !secret.is_empty()).then_some(id)
}

/// What a relay keeps of a named token instead of the token: SHA-256 over a label and the
/// token. It is the HMAC key of the token's proofs (so whoever reads it can prove as that token,
/// as with any challenge-response without a PAKE), but it gives neither the token nor the key
/// that seals the tab's storage, which are derived from the token itself.
pub fn verifier(token: &str) -> [u8; 32] {
    let mut hasher = Sha256Hasher::new();
    hasher.update(b"tern-token-verifier\0");
    hasher.update(token.as_bytes());
    hasher.finalize().into()
}

/// The HMAC key a token's proofs are made under: a named token's [`verifier`], the owner's token
/// itself (as before named tokens existed).
pub fn proof_key(token: &str) -> Vec<u8> {
    match token_id(token) {
        Some(_) => verifier(token).to_vec(),
        None => token.as_bytes().to_vec(),
    }
}

/// Whether `proof` is `prover`'s proof of `token` over these nonces.
pub fn verify(
    token: &str,
    prover: Prover,
    page: &ProofNonce,
    relay: &ProofNonce,
    proof: &Proof,
) -> bool {
    prove(token, prover, page, relay).matches(proof)
}

/// The key (AES-128) that seals what a tab keeps in browser storage, derived from the token: a
/// page of the same origin without the token cannot read or forge it.
pub fn storage_key(token: &str) -> [u8; 16] {
    let full = hmac_sha256(token.as_bytes(), &[b"tern-saved-session-key\0"]);
    let mut key = [0u8; 16];
    key.copy_from_slice(&full[..16]);
    key
}

/// A name for something kept per session key (nonce bounds) that does not show the key.
pub fn storage_name(token: &str, key_text: &str) -> String {
    let full = hmac_sha256(token.as_bytes(), &[b"tern-storage-name\0", key_text.as_bytes()]);
    Sha256(full).to_string()[..32].to_string()
}

/// A bridge-mode session key's fingerprint, for the relay to keep sequence floors per key
/// without learning it: 32 hex digits of SHA-256 over a label and the key's text. One key, one
/// fingerprint, whichever page sends it; nothing about the key follows from it.
pub fn key_id(key_text: &str) -> String {
    let mut hasher = Sha256Hasher::new();
    hasher.update(b"tern-key-id\0");
    hasher.update(key_text.as_bytes());
    Sha256(hasher.finalize().into()).to_string()[..32].to_string()
}

/// Whether `text` has [`key_id`]'s form (a relay ignores anything else).
pub fn is_key_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The API's authorization scheme: `Tern R.PROOF`, R the relay's nonce from `/api/challenge`
/// (used once) and PROOF the page's proof over it.
pub const SCHEME: &str = "Tern";

/// `Authorization: Tern R.PROOF`'s value.
pub fn authorization(relay: &ProofNonce, proof: &Proof) -> String {
    format!("{SCHEME} {relay}.{proof}")
}

/// The relay's nonce and the page's proof of an `Authorization` value in the `Tern` scheme;
/// `None` for another scheme or a malformed value.
pub fn parse_authorization(value: &str) -> Option<(ProofNonce, Proof)> {
    let rest = value.strip_prefix(SCHEME)?.strip_prefix(' ')?;
    let (nonce, proof) = rest.split_once('.')?;
    Some((nonce.parse().ok()?, proof.parse().ok()?))
}

/// The query parameter of a WebTransport CONNECT that carries the page's nonce: the relay
/// answers it as it accepts the session, with the owner's token's proof on the session's first
/// unidirectional stream, so the challenge arrives with the link and the hello leaves at once
/// (a greet on the control stream would cost a round trip more; issue 36). A named token's page
/// finds that proof not under its token and greets as always. The page's first WebTransport,
/// opened before the wasm is in, writes this query itself (www/app.js `earlyLink`).
pub const PUSHED_CHALLENGE_PARAM: &str = "greet";

/// The query (without `?`) that asks the relay to push its challenge to `nonce`.
pub fn pushed_challenge_query(nonce: &ProofNonce) -> String {
    format!("{PUSHED_CHALLENGE_PARAM}={nonce}")
}

/// The page's nonce in a CONNECT's path (`/wt?greet=…`), if it asks for a pushed challenge;
/// anything malformed is no ask (the page then greets on the control stream).
pub fn pushed_challenge_nonce(path: &str) -> Option<ProofNonce> {
    let (_, query) = path.split_once('?')?;
    query.split('&').find_map(|kv| {
        let value = kv.strip_prefix(PUSHED_CHALLENGE_PARAM)?.strip_prefix('=')?;
        value.parse().ok()
    })
}

/// The path the page asks a challenge of before an API request.
pub const CHALLENGE_PATH: &str = "/api/challenge";

/// `POST /api/challenge`'s body: the page's nonce, and a named token's id ([`token_id`]) so
/// that the relay proves with that token's key (absent: the owner's token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChallengeRequest {
    pub nonce: ProofNonce,
    pub token_id: Option<String>,
}

/// The relay's answer (also the control stream's `challenge`): its nonce and its proof over
/// both.
#[derive(Debug, Clone, Copy)]
pub struct Challenge {
    pub nonce: ProofNonce,
    pub proof: Proof,
}

/// A field holding 32 bytes in hex.
fn read_hex<T: FromStr>(f: &Fields<'_>, key: &'static str) -> Result<T, DecodeError> {
    f.str(key)?.parse().map_err(|_| DecodeError::data("not 64 hex digits", key))
}

/// An optional `token_id` field, which must have [`is_token_id`]'s form.
pub(super) fn read_token_id(f: &Fields<'_>) -> Result<Option<String>, DecodeError> {
    match f.opt_str("token_id")? {
        Some(id) if !is_token_id(&id) => Err(DecodeError::data("not a token id", "token_id")),
        id => Ok(id),
    }
}

impl Challenge {
    pub(super) fn write_fields(&self, w: &mut ObjectWriter<'_>) {
        w.str("nonce", &self.nonce.to_string()).str("proof", &self.proof.to_string());
    }

    pub(super) fn read_fields(f: &Fields<'_>) -> Result<Self, DecodeError> {
        Ok(Challenge { nonce: read_hex(f, "nonce")?, proof: read_hex(f, "proof")? })
    }
}

impl Message for ChallengeRequest {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("nonce", &self.nonce.to_string()).opt_str("token_id", self.token_id.as_deref());
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["nonce", "token_id"])?;
        Ok(ChallengeRequest { nonce: read_hex(&f, "nonce")?, token_id: read_token_id(&f)? })
    }
}

impl Message for Challenge {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        self.write_fields(w);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        Challenge::read_fields(&f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_challenge_is_asked_in_the_connect_path_and_anything_else_is_no_ask() {
        let nonce = ProofNonce([0xa5; 32]);
        let path = format!("/wt?{}", pushed_challenge_query(&nonce));
        assert_eq!(pushed_challenge_nonce(&path), Some(nonce));
        let among = format!("/wt?x=1&{}&y", pushed_challenge_query(&nonce));
        assert_eq!(pushed_challenge_nonce(&among), Some(nonce));
        assert_eq!(pushed_challenge_nonce("/wt"), None);
        assert_eq!(pushed_challenge_nonce("/wt?greet=abc"), None, "not 64 hex digits");
        assert_eq!(pushed_challenge_nonce(&format!("/wt?greeting={nonce}")), None);
        assert_eq!(pushed_challenge_nonce(&format!("/wt?greet={}", "G".repeat(64))), None);
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// RFC 4231's test cases 1, 2, 6 (a key longer than a block) and 7.
    #[test]
    fn hmac_matches_rfc_4231() {
        let mac = hmac_sha256(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(hex(&mac), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let mac =
            hmac_sha256(&[0xaa; 131], &[b"Test Using Larger Than Block-Size Key - Hash Key First"]);
        assert_eq!(hex(&mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        let mac = hmac_sha256(
            &[0xaa; 131],
            &[b"This is a test using a larger than block-size key and a larger than block-size \
                data. The key needs to be hashed before being used by the HMAC algorithm."],
        );
        assert_eq!(hex(&mac), "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    }

    #[test]
    fn a_named_token_proves_under_its_verifier_and_names_its_id() {
        let named = "tn.0123456789ab.c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA";
        assert_eq!(token_id(named), Some("0123456789ab"));
        assert_eq!(token_id("owner-token-of-some-length"), None);
        assert_eq!(token_id("tn.0123456789AB.x"), None, "ids are lowercase hex");
        assert_eq!(token_id("tn.0123456789ab."), None, "a secret is needed");
        assert_eq!(token_id("tn.0123.abc"), None);
        let (p, r) = (ProofNonce([1; 32]), ProofNonce([2; 32]));
        // The relay, holding only the verifier, proves and checks as the page does with the token.
        let by_page = prove(named, Prover::Page, &p, &r);
        assert!(prove_with_key(&verifier(named), Prover::Page, &p, &r).matches(&by_page));
        assert!(!prove_with_key(named.as_bytes(), Prover::Page, &p, &r).matches(&by_page));
        // The owner's token keys its proofs itself, as before.
        let owner = "owner-token-of-some-length";
        assert!(prove_with_key(owner.as_bytes(), Prover::Relay, &p, &r).matches(&prove(
            owner,
            Prover::Relay,
            &p,
            &r
        )));
        // The request names the id, and only a well-formed one is read.
        let req = ChallengeRequest { nonce: p, token_id: Some("0123456789ab".into()) };
        let text = super::super::encode(&req);
        assert_eq!(super::super::decode::<ChallengeRequest>(&text).unwrap(), req);
        let bad = format!(r#"{{"nonce":"{p}","token_id":"../x"}}"#);
        assert!(super::super::decode::<ChallengeRequest>(bad.as_bytes()).is_err());
    }

    #[test]
    fn a_proof_holds_only_for_its_token_side_and_nonces() {
        let (p, r) = (ProofNonce([1; 32]), ProofNonce([2; 32]));
        let relay = prove("token-of-the-relay", Prover::Relay, &p, &r);
        assert!(verify("token-of-the-relay", Prover::Relay, &p, &r, &relay));
        assert!(!verify("another-token-here", Prover::Relay, &p, &r, &relay));
        // A relay's proof is never a page's (no reflection), nor valid for other nonces.
        assert!(!verify("token-of-the-relay", Prover::Page, &p, &r, &relay));
        assert!(!verify("token-of-the-relay", Prover::Relay, &r, &p, &relay));
        assert!(!verify("token-of-the-relay", Prover::Relay, &p, &ProofNonce([3; 32]), &relay));
    }

    #[test]
    fn the_authorization_value_round_trips_and_nothing_else_parses() {
        let (r, proof) = (ProofNonce([0xab; 32]), Proof([0xcd; 32]));
        let value = authorization(&r, &proof);
        assert!(value.starts_with("Tern abab"));
        let (r2, p2) = parse_authorization(&value).unwrap();
        assert_eq!(r2, r);
        assert!(p2.matches(&proof));
        assert!(parse_authorization("Bearer abc").is_none());
        assert!(parse_authorization(&value.replace('.', "")).is_none());
        assert!(parse_authorization(&value[..value.len() - 1]).is_none());
    }

    #[test]
    fn key_ids_are_stable_distinct_and_well_formed() {
        let a = key_id("PWSoCIVurTVBGXAj873xNg");
        assert_eq!(a, key_id("PWSoCIVurTVBGXAj873xNg"));
        assert_ne!(a, key_id("WLThFE98+opDlEMyexqWsA"));
        assert!(is_key_id(&a) && !a.contains("PWSo"));
        assert!(!is_key_id("xyz") && !is_key_id(&a.to_uppercase()));
    }

    #[test]
    fn storage_keys_and_names_depend_on_the_token_and_hide_the_session_key() {
        assert_ne!(storage_key("token-one-1234567"), storage_key("token-two-1234567"));
        let name = storage_name("token-one-1234567", "SECRETKEYTEXT");
        assert_eq!(name.len(), 32);
        assert!(!name.contains("SECRET"));
        assert_ne!(name, storage_name("token-two-1234567", "SECRETKEYTEXT"));
    }
}
