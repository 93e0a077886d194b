//! The page's side of the challenge-response ([`crate::relay_proto::proof`]): before it sends
//! anything but a random nonce, whatever answers on the relay's address must prove it knows the
//! token. One [`Verifier`] per exchange (a control stream, or one API request), each with a
//! fresh nonce from the driver's random source.

use super::connect::ConnectError;
use super::status::FailCode;
use crate::relay_proto::control::ProofText;
use crate::relay_proto::proof::{self, Challenge, ChallengeRequest, Proof, ProofNonce, Prover};
use crate::relay_proto::{ClientMessage, PROTOCOL_VERSION, ServerMessage, decode};

/// What the person is told when the answer did not prove the token: nothing was sent.
pub const NOT_VERIFIED: &str = "What answers at the relay's address did not prove that it \
     knows the token in this page's address, so nothing was sent to it: no token, no screen, no \
     typing. Either the address is out of date (open the URL tern-relay printed last), or another \
     program took the relay's port while tern-relay was down. Try again once tern-relay runs.";

/// How many challenges one API request may spend before its answer stands (see
/// [`Verifier::challenge_was_lost`]).
pub const API_ATTEMPTS: usize = 3;

/// One exchange's page nonce, and what to do with the relay's answer.
#[derive(Debug)]
pub struct Verifier {
    nonce: ProofNonce,
}

impl Verifier {
    /// `random`: 32 fresh random bytes (the page's `crypto.getRandomValues`).
    pub fn new(random: [u8; 32]) -> Verifier {
        Verifier { nonce: ProofNonce(random) }
    }

    /// The control stream's first line; for a named token, with its id (never its secret).
    pub fn greet(&self, token: &str) -> ClientMessage {
        let token_id = proof::token_id(token).map(str::to_string);
        ClientMessage::Greet { protocol: PROTOCOL_VERSION, nonce: self.nonce, token_id }
    }

    /// `POST /api/challenge`'s body; for a named token, with its id.
    pub fn request(&self, token: &str) -> ChallengeRequest {
        ChallengeRequest { nonce: self.nonce, token_id: proof::token_id(token).map(str::to_string) }
    }

    /// Checks the relay's proof; the page's own proof when it holds.
    pub fn answer(&self, token: &str, challenge: &Challenge) -> Result<Proof, ConnectError> {
        if !proof::verify(token, Prover::Relay, &self.nonce, &challenge.nonce, &challenge.proof) {
            return Err(not_verified());
        }
        Ok(proof::prove(token, Prover::Page, &self.nonce, &challenge.nonce))
    }

    /// The control stream's answer to the greet: the proof for the hello, or why not (a
    /// refusal the relay sent instead, a closed stream, or a proof that does not hold).
    pub fn control_answer(
        &self,
        token: &str,
        line: Option<&[u8]>,
    ) -> Result<ProofText, ConnectError> {
        let line = line.ok_or_else(|| {
            ConnectError::Retry("the relay closed the control stream before its challenge".into())
        })?;
        match decode::<ServerMessage>(line) {
            Ok(ServerMessage::Challenge(c)) => self.answer(token, &c.0).map(ProofText),
            // A refusal (another version, rate limited…) reads as any answer would.
            Ok(ServerMessage::Error { code, message }) => {
                Err(super::connect::refusal(code, message))
            }
            _ => Err(not_verified()),
        }
    }

    /// Whether `line`, the first line of a WebTransport session's first unidirectional stream,
    /// is the relay's challenge to this verifier's nonce (sent in the CONNECT,
    /// [`proof::pushed_challenge_query`]) and proves `token`: then
    /// [`control_answer`](Self::control_answer) on it gives the hello's proof, no greet needed.
    /// `false` for anything else, which costs nothing but that round trip: the relay proves
    /// with the owner's token there, so a named token's page greets as always, and a squatter's
    /// answer is then refused on the control stream as any other.
    pub fn pushed_challenge_holds(&self, token: &str, line: Option<&[u8]>) -> bool {
        match line.map(decode::<ServerMessage>) {
            Some(Ok(ServerMessage::Challenge(c))) => {
                proof::verify(token, Prover::Relay, &self.nonce, &c.0.nonce, &c.0.proof)
            }
            _ => false,
        }
    }

    /// Whether a request that carried the page's proof over a challenge the relay proved should
    /// go again with a new challenge. Having proved itself, the relay knows the token, so its
    /// 401 does not mean a wrong token: the challenge was spent, expired or forgotten meanwhile
    /// (a restart, or a flood of challenges from others pushing it out of the relay's bounded
    /// table), and a new one will do.
    pub fn challenge_was_lost(status: u16) -> bool {
        status == 401
    }

    /// `POST /api/challenge`'s answer: the `Authorization` value for the request it allows.
    pub fn http_answer(
        &self,
        token: &str,
        status: u16,
        body: &[u8],
    ) -> Result<String, ConnectError> {
        self.http_proof(token, status, body).map(|(r, p)| proof::authorization(&r, &p))
    }

    /// `POST /api/challenge`'s answer as the relay's nonce and the page's proof over it: for an
    /// `Authorization` value, or a WebSocket upgrade's `tern-proof` subprotocol.
    pub fn http_proof(
        &self,
        token: &str,
        status: u16,
        body: &[u8],
    ) -> Result<(ProofNonce, Proof), ConnectError> {
        match status {
            200 => {
                let challenge: Challenge = decode(body).map_err(|_| not_verified())?;
                let proof = self.answer(token, &challenge)?;
                Ok((challenge.nonce, proof))
            }
            // An older relay has no such route (and a page from a newer one would have said so).
            404 => Err(ConnectError::Fatal {
                code: FailCode::VersionMismatch,
                message: "This page is from another version of tern-relay. Reload the page.".into(),
            }),
            // The relay's own refusals (rate limited, …) read as the API's do; the rest retry.
            s => Err(super::info_response(s, body)
                .err()
                .unwrap_or_else(|| ConnectError::Retry(format!("relay answered HTTP {s}")))),
        }
    }
}

fn not_verified() -> ConnectError {
    ConnectError::Fatal { code: FailCode::RelayNotVerified, message: NOT_VERIFIED.into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::control::ChallengeText;
    use crate::relay_proto::{ErrorCode, encode, encode_line};

    const TOKEN: &str = "the-token-the-page-holds";

    fn relay_answer(token: &str, page: &Verifier) -> Challenge {
        let r = ProofNonce([7; 32]);
        Challenge { nonce: r, proof: proof::prove(token, Prover::Relay, &page.nonce, &r) }
    }

    #[test]
    fn the_greet_carries_only_the_protocol_and_a_nonce() {
        let v = Verifier::new([9; 32]);
        let line = String::from_utf8(v.greet(TOKEN).to_line()).unwrap();
        assert_eq!(
            line,
            format!(
                "{{\"type\":\"greet\",\"protocol\":{PROTOCOL_VERSION},\"nonce\":\"{}\"}}\n",
                "09".repeat(32)
            )
        );
        // A named token's greet and challenge request add its id, never its secret.
        let named = "tn.00112233aabb.the-secret-part-of-the-named-token";
        let line = String::from_utf8(v.greet(named).to_line()).unwrap();
        assert!(line.contains("\"token_id\":\"00112233aabb\""), "{line}");
        assert!(!line.contains("the-secret-part"), "{line}");
        let body = String::from_utf8(crate::relay_proto::encode(&v.request(named))).unwrap();
        assert!(body.contains("00112233aabb") && !body.contains("the-secret-part"), "{body}");
    }

    #[test]
    fn a_relay_that_knows_the_token_gets_the_pages_proof() {
        let v = Verifier::new([1; 32]);
        let c = relay_answer(TOKEN, &v);
        let line = encode_line(&ServerMessage::Challenge(ChallengeText(c)));
        let proof = v.control_answer(TOKEN, Some(&line[..line.len() - 1])).unwrap();
        assert!(proof::verify(TOKEN, Prover::Page, &v.nonce, &c.nonce, &proof.0));
        let auth = v.http_answer(TOKEN, 200, &encode(&c)).unwrap();
        assert!(auth.starts_with("Tern "));
    }

    #[test]
    fn anything_that_does_not_prove_the_token_is_refused_and_says_so() {
        let v = Verifier::new([1; 32]);
        let squatter = relay_answer("a-guess-at-the-token", &v);
        fn fail<T: std::fmt::Debug>(r: Result<T, ConnectError>) -> String {
            match r {
                Err(ConnectError::Fatal { code: FailCode::RelayNotVerified, message }) => message,
                other => panic!("expected not verified, got {other:?}"),
            }
        }
        let line = encode(&ServerMessage::Challenge(ChallengeText(squatter)));
        assert!(fail(v.control_answer(TOKEN, Some(&line))).contains("did not prove"));
        fail(v.http_answer(TOKEN, 200, &encode(&squatter)));
        // A reflected page proof, garbage, or a `ready` without a challenge: not verified.
        let reflected = Challenge {
            nonce: squatter.nonce,
            proof: proof::prove(TOKEN, Prover::Page, &v.nonce, &squatter.nonce),
        };
        fail(v.http_answer(TOKEN, 200, &encode(&reflected)));
        fail(v.http_answer(TOKEN, 200, b"{\"ok\":true}"));
        fail(v.control_answer(TOKEN, Some(b"{\"type\":\"pong\"}")));
    }

    #[test]
    fn a_pushed_challenge_stands_only_for_the_token_it_proves() {
        let v = Verifier::new([3; 32]);
        let line = |c: Challenge| {
            let mut l = encode_line(&ServerMessage::Challenge(ChallengeText(c)));
            l.pop();
            l
        };
        let pushed = line(relay_answer(TOKEN, &v));
        assert!(v.pushed_challenge_holds(TOKEN, Some(&pushed)));
        assert!(v.control_answer(TOKEN, Some(&pushed)).is_ok(), "the hello's proof comes from it");
        // A named token's page: the relay pushed under the owner's token, so it greets instead.
        let named = "tn.00112233aabb.the-secret-part-of-the-named-token";
        assert!(!v.pushed_challenge_holds(named, Some(&pushed)));
        // To another nonce (another link's), from a squatter, or not a challenge at all.
        let other = Verifier::new([4; 32]);
        assert!(!other.pushed_challenge_holds(TOKEN, Some(&pushed)));
        assert!(!v.pushed_challenge_holds(TOKEN, Some(&line(relay_answer("a-guess", &v)))));
        assert!(!v.pushed_challenge_holds(TOKEN, Some(b"{\"type\":\"pong\"}")));
        assert!(!v.pushed_challenge_holds(TOKEN, Some(b"\xff garbage")));
        assert!(!v.pushed_challenge_holds(TOKEN, None));
    }

    #[test]
    fn only_a_refused_proof_asks_for_a_new_challenge() {
        assert!(Verifier::challenge_was_lost(401));
        for status in [200, 403, 404, 429, 500] {
            assert!(!Verifier::challenge_was_lost(status), "{status}");
        }
    }

    #[test]
    fn a_relays_refusal_reads_as_its_refusal() {
        let v = Verifier::new([1; 32]);
        let line = encode(&ServerMessage::error(ErrorCode::VersionMismatch, "reload"));
        match v.control_answer(TOKEN, Some(&line)) {
            Err(ConnectError::Fatal { code: FailCode::VersionMismatch, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(v.control_answer(TOKEN, None), Err(ConnectError::Retry(_))));
        assert!(matches!(
            v.http_answer(TOKEN, 429, b""),
            Err(ConnectError::Fatal { code: FailCode::RateLimited, .. })
        ));
    }
}
