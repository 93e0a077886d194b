//! The SSP receiver: the peer's states we hold, and applying each instruction to the one it names
//! (MOSH-PROTOCOL.md 6.5-6.6, 7.3).

use std::time::Duration;

use super::SyncState;
use crate::time::Instant;
use crate::wire::{Instruction, StateNum};

/// More held states than this means the peer is misbehaving or we are far behind.
const RECEIVED_STATES_CAP: usize = 1024;
/// After hitting the cap, further instructions are dropped for this long (mosh's quench).
const QUENCH: Duration = Duration::from_secs(15);

/// Which server instructions the receiver applies.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReceivePolicy {
    /// Apply each instruction to whichever held state it names (mosh-client's design).
    AllRetained,
    /// Apply only instructions based on the newest state (a stop-and-wait client; exists only to
    /// measure what that costs).
    NewestOnly,
}

/// What became of one instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new newest state; `had_diff` says whether it changed anything (then it wants an ack).
    Newest {
        had_diff: bool,
        base_was_newest: bool,
    },
    /// A state older than the newest, filled in out of order (no ack change).
    OutOfOrder,
    /// `new_num` is already held.
    Duplicate,
    /// `new_num` is below everything held: a late copy of a state already superseded.
    Stale,
    /// The base state is not held (must not happen with a well-behaved server).
    UnknownBase,
    /// The base is held but the stop-and-wait policy refused to use it.
    RefusedOlderBase,
    /// Dropped while quenched after too many held states.
    Quenched,
    /// The diff did not apply (malformed peer data).
    ApplyFailed,
}

#[derive(Clone, Debug)]
struct ReceivedState<S> {
    num: StateNum,
    arrived: Instant,
    state: S,
}

/// Mosh's receiver half of `Transport`: held states in ascending number order.
#[derive(Debug)]
pub struct Receiver<S: SyncState> {
    states: Vec<ReceivedState<S>>,
    policy: ReceivePolicy,
    quench_until: Option<Instant>,
    /// The newest state already handed to the application by [`Receiver::take_new_diff`].
    delivered: S,
}

impl<S: SyncState> Receiver<S> {
    pub fn new(initial: S, now: Instant, policy: ReceivePolicy) -> Self {
        Receiver {
            delivered: initial.clone(),
            states: vec![ReceivedState {
                num: StateNum::INITIAL,
                arrived: now,
                state: initial,
            }],
            policy,
            quench_until: None,
        }
    }

    fn newest_entry(&self) -> &ReceivedState<S> {
        // Never empty: throwaway only removes states below a held base, which stays.
        self.states
            .last()
            .expect("received-state list is never empty")
    }

    pub fn newest(&self) -> &S {
        &self.newest_entry().state
    }

    pub fn newest_num(&self) -> StateNum {
        self.newest_entry().num
    }

    /// Arrival time of the newest state ("last contact").
    pub fn newest_arrived(&self) -> Instant {
        self.newest_entry().arrived
    }

    /// How many states are held (usually one to three).
    pub fn held(&self) -> usize {
        self.states.len()
    }

    /// Applies one assembled instruction (its ack has already been processed by the caller).
    pub fn receive(&mut self, now: Instant, instruction: &Instruction) -> Outcome {
        let new_num = instruction.new_num;
        if self.states.iter().any(|s| s.num == new_num) {
            return Outcome::Duplicate;
        }
        if self
            .states
            .first()
            .is_some_and(|oldest| new_num < oldest.num)
        {
            return Outcome::Stale;
        }
        let Some(base_index) = self
            .states
            .iter()
            .position(|s| s.num == instruction.old_num)
        else {
            return Outcome::UnknownBase;
        };
        let base_was_newest = base_index + 1 == self.states.len();
        if self.policy == ReceivePolicy::NewestOnly && !base_was_newest {
            return Outcome::RefusedOlderBase;
        }
        if self.states.len() > RECEIVED_STATES_CAP {
            if self.quench_until.is_some_and(|until| now < until) {
                return Outcome::Quenched;
            }
            self.quench_until = Some(now + QUENCH);
        }

        let mut state = self.states[base_index].state.clone();
        if !instruction.diff.is_empty() && state.apply(&instruction.diff).is_err() {
            return Outcome::ApplyFailed;
        }
        // Throw away only after the diff applied: a malformed instruction must not cost us states.
        // The base itself is never thrown away here (mosh's server keeps throwaway <= old_num; a
        // peer claiming more is clamped so we keep a base to build on).
        let throwaway = instruction.throwaway_num.min(instruction.old_num);
        self.states.retain(|s| s.num >= throwaway);

        let entry = ReceivedState {
            num: new_num,
            arrived: now,
            state,
        };
        let position = self.states.partition_point(|s| s.num < new_num);
        let is_newest = position == self.states.len();
        self.states.insert(position, entry);
        if is_newest {
            Outcome::Newest {
                had_diff: !instruction.diff.is_empty(),
                base_was_newest,
            }
        } else {
            Outcome::OutOfOrder
        }
    }

    /// The diff from the state last handed to the application to the newest state held, then
    /// drops the oldest held state's content from every held state (mosh's `get_remote_diff`; how
    /// a server learns new input exactly once).
    ///
    /// Subtracting the *oldest* keeps every held state a descendant of the same base, so an
    /// instruction built on an older held state still diffs correctly against what was delivered.
    pub fn take_new_diff(&mut self) -> Vec<u8> {
        let diff = self.newest().diff_from(&self.delivered);
        let oldest = self.states[0].state.clone();
        for held in &mut self.states {
            held.state.subtract(&oldest);
        }
        self.delivered = self.newest().clone();
        diff
    }
}
