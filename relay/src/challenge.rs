//! The relay's side of the challenge-response (`tern::relay_proto::proof`): it proves it knows
//! the token before a page sends anything, then checks the page's proof. The page never sends
//! the token, so whoever takes the relay's port while it is down learns nothing from a page.
//!
//! On the control stream the exchange is in-band (greet, challenge, hello). For the HTTP API
//! the relay hands out a nonce at `POST /api/challenge` and remembers it here until one request
//! spends it (`Authorization: Tern R.PROOF`), or for [`Challenges::LIFETIME`] at most.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tern::relay_proto::proof::{self, Challenge, Proof, ProofNonce, Prover};

use crate::tokens::Who;

/// 32 bytes from the OS for the relay's share of a challenge.
pub fn fresh_nonce() -> Result<ProofNonce, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(ProofNonce(bytes))
}

/// The relay's answer to a page's nonce: its own nonce and its proof over both, under `key`
/// ([`proof::proof_key`]: the owner's token, or a named token's verifier).
pub fn answer(key: &[u8], page: &ProofNonce, relay: ProofNonce) -> Challenge {
    Challenge { nonce: relay, proof: proof::prove_with_key(key, Prover::Relay, page, &relay) }
}

/// Whether `proof` is the page's proof under `key` over the two nonces (constant time).
pub fn page_proof_holds(key: &[u8], page: &ProofNonce, relay: &ProofNonce, proof: &Proof) -> bool {
    proof::prove_with_key(key, Prover::Page, page, relay).matches(proof)
}

/// The API's outstanding challenges: each relay nonce with the page nonce it answered, and
/// whose key it was made under.
#[derive(Debug, Default)]
pub struct Challenges {
    inner: Mutex<Outstanding>,
}

#[derive(Debug)]
struct Issued {
    page: ProofNonce,
    who: Who,
    key: Vec<u8>,
    at: Instant,
}

#[derive(Debug, Default)]
struct Outstanding {
    by_nonce: HashMap<ProofNonce, Issued>,
    /// Oldest first, for eviction when full (a nonce spent already is skipped).
    order: VecDeque<ProofNonce>,
}

impl Challenges {
    /// A page has this long from its challenge to its request (a round trip, with room).
    pub const LIFETIME: Duration = Duration::from_secs(30);
    /// At most this many outstanding; the oldest is forgotten first (its page asks again).
    pub const MAX: usize = 4096;

    /// A new challenge for the page's nonce under `who`'s `key`, remembered until spent or
    /// expired.
    pub fn issue(
        &self,
        who: Who,
        key: Vec<u8>,
        page: ProofNonce,
        now: Instant,
    ) -> Result<Challenge, getrandom::Error> {
        let relay = fresh_nonce()?;
        let answer = answer(&key, &page, relay);
        let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while o.by_nonce.len() >= Self::MAX {
            let Some(oldest) = o.order.pop_front() else { break };
            o.by_nonce.remove(&oldest);
        }
        o.by_nonce.insert(relay, Issued { page, who, key, at: now });
        o.order.push_back(relay);
        if o.order.len() > 2 * Self::MAX {
            // Spent nonces linger in `order`; drop them so it stays bounded.
            let Outstanding { by_nonce, order } = &mut *o;
            order.retain(|n| by_nonce.contains_key(n));
        }
        Ok(answer)
    }

    /// Spends the challenge `relay` (once, whatever the outcome) and checks the page's proof
    /// over it: whose it is, or `None` for an unknown, spent or expired nonce, or a wrong proof.
    pub fn redeem(&self, relay: &ProofNonce, proof: &Proof, now: Instant) -> Option<Who> {
        let issued = {
            let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            o.by_nonce.remove(relay)
        }?;
        (now.saturating_duration_since(issued.at) <= Self::LIFETIME
            && page_proof_holds(&issued.key, &issued.page, relay, proof))
        .then_some(issued.who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_proof(token: &str, page: &ProofNonce, c: &Challenge) -> Proof {
        proof::prove(token, Prover::Page, page, &c.nonce)
    }

    #[test]
    fn a_challenge_is_spent_by_one_request_and_only_with_the_right_proof() {
        let token = "a-token-of-twenty-chars";
        let key = || proof::proof_key(token);
        let table = Challenges::default();
        let now = Instant::now();
        let page = ProofNonce([5; 32]);
        let c = table.issue(Who::Owner, key(), page, now).unwrap();
        assert!(proof::verify(token, Prover::Relay, &page, &c.nonce, &c.proof));
        let right = page_proof(token, &page, &c);
        assert_eq!(table.redeem(&c.nonce, &right, now), Some(Who::Owner));
        // Replayed: refused.
        assert_eq!(table.redeem(&c.nonce, &right, now), None);
        // A wrong proof spends the challenge too.
        let c = table.issue(Who::Owner, key(), page, now).unwrap();
        let wrong = page_proof("another-token-entirely", &page, &c);
        assert_eq!(table.redeem(&c.nonce, &wrong, now), None);
        assert_eq!(table.redeem(&c.nonce, &page_proof(token, &page, &c), now), None);
        // Expired.
        let c = table.issue(Who::Owner, key(), page, now).unwrap();
        let late = now + Challenges::LIFETIME + Duration::from_secs(1);
        assert_eq!(table.redeem(&c.nonce, &page_proof(token, &page, &c), late), None);
        // A named token's challenge is made under its verifier and redeemed as that token.
        let named = "tn.0123456789ab.some-secret-of-a-named-token";
        let who = Who::Named { name: "phone".into(), id: "0123456789ab".into(), read_only: true };
        let c = table.issue(who.clone(), proof::verifier(named).to_vec(), page, now).unwrap();
        assert!(proof::verify(named, Prover::Relay, &page, &c.nonce, &c.proof));
        assert_eq!(table.redeem(&c.nonce, &page_proof(named, &page, &c), now), Some(who));
    }

    #[test]
    fn the_table_is_bounded_and_forgets_the_oldest() {
        let key = proof::proof_key("a-token-of-twenty-chars");
        let table = Challenges::default();
        let now = Instant::now();
        let page = ProofNonce([5; 32]);
        let first = table.issue(Who::Owner, key.clone(), page, now).unwrap();
        for _ in 0..Challenges::MAX {
            table.issue(Who::Owner, key.clone(), page, now).unwrap();
        }
        let o = table.inner.lock().unwrap();
        assert_eq!(o.by_nonce.len(), Challenges::MAX);
        assert!(!o.by_nonce.contains_key(&first.nonce));
    }
}
