//! Handshake slots: what a session holds from its first packet (or WebSocket upgrade) until its
//! hello is admitted or refused. Two pools, each bounded in all and per source:
//!
//! - the shared pool (`--max-handshakes`): QUIC handshakes and upgrades that proved nothing yet;
//! - the authenticated pool (`--max-authenticated-handshakes`): upgrades whose request already
//!   carried the right credential, so a flood of unauthenticated handshakes cannot refuse them.
//!
//! Within either pool one source holds at most `--max-handshakes-per-source`, so one source
//! cannot take every slot. The counts per source are per pool: a stranger sharing the owner's
//! address (127.0.0.1 behind `ssh -L`) fills only the shared pool's count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::SourceKey;

/// Which pool a handshake draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Pool {
    Shared,
    Authenticated,
}

/// Why no slot was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSlot {
    /// The pool is full.
    PoolFull,
    /// This source holds its share of the pool already.
    SourceFull,
}

/// Both pools and who holds what in them.
#[derive(Debug)]
pub(crate) struct HandshakeSlots {
    shared: Arc<Semaphore>,
    authenticated: Arc<Semaphore>,
    per_source: usize,
    held: Mutex<HashMap<(Pool, SourceKey), usize>>,
}

/// One held slot: freed (in its pool and its source's count) when dropped.
#[derive(Debug)]
pub(crate) struct HandshakeSlot {
    _permit: OwnedSemaphorePermit,
    slots: Arc<HandshakeSlots>,
    key: (Pool, SourceKey),
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

impl HandshakeSlots {
    pub fn new(shared: usize, authenticated: usize, per_source: usize) -> Arc<HandshakeSlots> {
        Arc::new(HandshakeSlots {
            shared: Arc::new(Semaphore::new(shared)),
            authenticated: Arc::new(Semaphore::new(authenticated)),
            per_source: per_source.max(1),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A slot in `pool` for `source`, at once or not at all.
    pub fn take(self: &Arc<Self>, pool: Pool, source: SourceKey) -> Result<HandshakeSlot, NoSlot> {
        let key = (pool, source);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.get(&key).copied().unwrap_or(0);
        if count >= self.per_source {
            return Err(NoSlot::SourceFull);
        }
        let semaphore = match pool {
            Pool::Shared => &self.shared,
            Pool::Authenticated => &self.authenticated,
        };
        let permit = Arc::clone(semaphore).try_acquire_owned().map_err(|_| NoSlot::PoolFull)?;
        held.insert(key, count + 1);
        Ok(HandshakeSlot { _permit: permit, slots: Arc::clone(self), key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_holds_its_share_and_the_pools_are_apart() {
        let slots = HandshakeSlots::new(3, 2, 2);
        let a = SourceKey::of([10, 0, 0, 1].into());
        let b = SourceKey::of([10, 0, 0, 2].into());
        let c = SourceKey::of([10, 0, 0, 3].into());
        let a1 = slots.take(Pool::Shared, a).unwrap();
        let _a2 = slots.take(Pool::Shared, a).unwrap();
        assert_eq!(slots.take(Pool::Shared, a).unwrap_err(), NoSlot::SourceFull);
        let _b1 = slots.take(Pool::Shared, b).unwrap();
        assert_eq!(slots.take(Pool::Shared, c).unwrap_err(), NoSlot::PoolFull);
        // The authenticated pool is untouched by the shared one's flood, for the same source too.
        let _a3 = slots.take(Pool::Authenticated, a).unwrap();
        let _c1 = slots.take(Pool::Authenticated, c).unwrap();
        assert_eq!(slots.take(Pool::Authenticated, b).unwrap_err(), NoSlot::PoolFull);
        // A freed slot counts again for its source and its pool.
        drop(a1);
        let _a4 = slots.take(Pool::Shared, a).unwrap();
        assert_eq!(slots.take(Pool::Shared, a).unwrap_err(), NoSlot::SourceFull);
    }
}
