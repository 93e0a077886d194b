//! The State Synchronization Protocol: sender, receiver, RTT estimation and timers.

mod state;

pub use state::{ApplyError, SyncState};
