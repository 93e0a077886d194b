//! The contract between the transport and the states it synchronizes.

use std::fmt;

/// A state that the SSP transport can synchronize: the client's user stream, the server's
/// terminal, or a test state in the simulation.
///
/// Mosh's model (MOSH-PROTOCOL.md 6.1): each side owns a current state, sends numbered snapshots
/// as diffs against a snapshot the peer holds, and the peer rebuilds them by `apply`.
pub trait SyncState: Clone + PartialEq + fmt::Debug {
    /// The encoded diff (a `UserMessage` or `HostMessage`) that turns `base` into `self`.
    /// Empty when nothing changed.
    fn diff_from(&self, base: &Self) -> Vec<u8>;

    /// Applies a diff the peer made with `diff_from`. The diff is peer data: anything malformed is
    /// an error, never a panic, and leaves `self` in some valid state (the caller discards it).
    fn apply(&mut self, diff: &[u8]) -> Result<(), ApplyError>;

    /// Forgets what `acked` already holds when `acked` is a state the peer has acknowledged and
    /// every kept state descends from it (mosh's `subtract`; the user stream drops acked events).
    /// States that do not accumulate history keep the default, which does nothing.
    fn subtract(&mut self, _acked: &Self) {}
}

/// A diff from the peer that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot apply the peer's diff: {0}")]
pub struct ApplyError(pub String);
