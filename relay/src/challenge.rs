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

use crate::auth::Token;

/// 32 bytes from the OS for the relay's share of a challenge.
pub fn fresh_nonce() -> Result<ProofNonce, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(ProofNonce(bytes))
}

/// The relay's answer to a page's nonce: its own nonce and its proof over both.
pub fn answer(token: &Token, page: &ProofNonce, relay: ProofNonce) -> Challenge {
    Challenge { nonce: relay, proof: proof::prove(token.expose(), Prover::Relay, page, &relay) }
}

/// Whether `proof` is the page's proof of the token over the two nonces (constant time).
pub fn page_proof_holds(
    token: &Token,
    page: &ProofNonce,
    relay: &ProofNonce,
    proof: &Proof,
) -> bool {
    proof::verify(token.expose(), Prover::Page, page, relay, proof)
}

/// The API's outstanding challenges: each relay nonce with the page nonce it answered.
#[derive(Debug, Default)]
pub struct Challenges {
    inner: Mutex<Outstanding>,
}

#[derive(Debug, Default)]
struct Outstanding {
    by_nonce: HashMap<ProofNonce, (ProofNonce, Instant)>,
    /// Oldest first, for eviction when full (a nonce spent already is skipped).
    order: VecDeque<ProofNonce>,
}

impl Challenges {
    /// A page has this long from its challenge to its request (a round trip, with room).
    pub const LIFETIME: Duration = Duration::from_secs(30);
    /// At most this many outstanding; the oldest is forgotten first (its page asks again).
    pub const MAX: usize = 4096;

    /// A new challenge for the page's nonce, remembered until spent or expired.
    pub fn issue(
        &self,
        token: &Token,
        page: ProofNonce,
        now: Instant,
    ) -> Result<Challenge, getrandom::Error> {
        let relay = fresh_nonce()?;
        let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while o.by_nonce.len() >= Self::MAX {
            let Some(oldest) = o.order.pop_front() else { break };
            o.by_nonce.remove(&oldest);
        }
        o.by_nonce.insert(relay, (page, now));
        o.order.push_back(relay);
        if o.order.len() > 2 * Self::MAX {
            // Spent nonces linger in `order`; drop them so it stays bounded.
            let Outstanding { by_nonce, order } = &mut *o;
            order.retain(|n| by_nonce.contains_key(n));
        }
        Ok(answer(token, &page, relay))
    }

    /// Spends the challenge `relay` (once, whatever the outcome) and checks the page's proof
    /// over it. False for an unknown, spent or expired nonce, or a wrong proof.
    pub fn redeem(&self, token: &Token, relay: &ProofNonce, proof: &Proof, now: Instant) -> bool {
        let issued = {
            let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            o.by_nonce.remove(relay)
        };
        match issued {
            Some((page, at)) if now.saturating_duration_since(at) <= Self::LIFETIME => {
                page_proof_holds(token, &page, relay, proof)
            }
            _ => false,
        }
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
        let token = Token::new("a-token-of-twenty-chars");
        let table = Challenges::default();
        let now = Instant::now();
        let page = ProofNonce([5; 32]);
        let c = table.issue(&token, page, now).unwrap();
        assert!(proof::verify(token.expose(), Prover::Relay, &page, &c.nonce, &c.proof));
        let right = page_proof(token.expose(), &page, &c);
        assert!(table.redeem(&token, &c.nonce, &right, now));
        // Replayed: refused.
        assert!(!table.redeem(&token, &c.nonce, &right, now));
        // A wrong proof spends the challenge too.
        let c = table.issue(&token, page, now).unwrap();
        let wrong = page_proof("another-token-entirely", &page, &c);
        assert!(!table.redeem(&token, &c.nonce, &wrong, now));
        assert!(!table.redeem(&token, &c.nonce, &page_proof(token.expose(), &page, &c), now));
        // Expired.
        let c = table.issue(&token, page, now).unwrap();
        let late = now + Challenges::LIFETIME + Duration::from_secs(1);
        assert!(!table.redeem(&token, &c.nonce, &page_proof(token.expose(), &page, &c), late));
    }

    #[test]
    fn the_table_is_bounded_and_forgets_the_oldest() {
        let token = Token::new("a-token-of-twenty-chars");
        let table = Challenges::default();
        let now = Instant::now();
        let page = ProofNonce([5; 32]);
        let first = table.issue(&token, page, now).unwrap();
        for _ in 0..Challenges::MAX {
            table.issue(&token, page, now).unwrap();
        }
        let o = table.inner.lock().unwrap();
        assert_eq!(o.by_nonce.len(), Challenges::MAX);
        assert!(!o.by_nonce.contains_key(&first.nonce));
    }
}
