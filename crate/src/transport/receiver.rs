//! The SSP receiver: the peer's states we hold, and applying each instruction to the one it names
//! (MOSH-PROTOCOL.md 6.5-6.6, 7.3).

use std::collections::VecDeque;
use std::time::Duration;

use super::SyncState;
use crate::time::Instant;
use crate::wire::{Instruction, StateNum};

/// More held states than this means the peer is misbehaving or we are far behind.
const RECEIVED_STATES_CAP: usize = 1024;
/// After hitting the cap, further instructions are dropped for this long (mosh's quench).
const QUENCH: Duration = Duration::from_secs(15);
/// Instructions whose base has not arrived yet (reordered, or still to be retransmitted) wait here.
const PARKED_CAP: usize = 16;
/// How many discarded state numbers are remembered, to tell "we threw its base away" from "its
/// base never arrived" when an instruction names a state we do not hold.
const DISCARDED_MEMORY: usize = 256;

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
    Newest { had_diff: bool, base_was_newest: bool },
    /// A state older than the newest, filled in out of order (no ack change).
    OutOfOrder,
    /// `new_num` is already held.
    Duplicate,
    /// Its base has not arrived (yet): kept until the base arrives or the state is superseded.
    Parked,
    /// A late instruction for a state older than the newest, whose base is gone: superseded.
    Stale,
    /// A data instruction dropped because its base was a state we had received but no longer
    /// held. With a well-behaved server this never happens (we keep every state it may diff
    /// from); it is what a client that keeps too little would show.
    UnknownBase,
    /// A data instruction given up because its base never reached us: the server diffed from a
    /// state it sent moments before, and that state was lost on the path. Its retransmission
    /// from the acknowledged state repairs it; nothing a client can hold would have helped.
    LostBase,
    /// An empty ack based on a state we do not hold: the ack it carries was processed, nothing
    /// else is lost (mosh bases empty acks on the state it assumes we have).
    AckOnUnknownBase,
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
///
/// Beyond mosh: an instruction whose base is not held yet is parked rather than dropped, and
/// applied when its base arrives (reordering on the path no longer costs a retransmission).
#[derive(Debug)]
pub struct Receiver<S: SyncState> {
    states: Vec<ReceivedState<S>>,
    policy: ReceivePolicy,
    quench_until: Option<Instant>,
    /// The newest state already handed to the application by [`Receiver::take_new_diff`].
    delivered: S,
    parked: Vec<Instruction>,
    /// The most recently discarded state numbers (see [`DISCARDED_MEMORY`]).
    discarded: VecDeque<StateNum>,
}

impl<S: SyncState> Receiver<S> {
    pub fn new(initial: S, now: Instant, policy: ReceivePolicy) -> Self {
        Receiver {
            delivered: initial.clone(),
            states: vec![ReceivedState { num: StateNum::INITIAL, arrived: now, state: initial }],
            policy,
            quench_until: None,
            parked: Vec::new(),
            discarded: VecDeque::new(),
        }
    }

    /// A receiver that takes over from an earlier one of the same session: it holds the peer's
    /// state `num` (the newest the earlier one received), which the peer may diff from.
    pub fn resumed(state: S, num: StateNum, now: Instant, policy: ReceivePolicy) -> Self {
        let mut receiver = Receiver::new(state, now, policy);
        receiver.states[0].num = num;
        receiver
    }

    fn newest_entry(&self) -> &ReceivedState<S> {
        // Never empty: throwaway only removes states below a held base, which stays.
        self.states.last().expect("received-state list is never empty")
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

    /// The held state `num`, if held.
    pub fn state(&self, num: StateNum) -> Option<&S> {
        self.states.iter().find(|s| s.num == num).map(|s| &s.state)
    }

    /// How many states are held (usually one to three).
    pub fn held(&self) -> usize {
        self.states.len()
    }

    fn holds(&self, num: StateNum) -> bool {
        self.states.iter().any(|s| s.num == num)
    }

    /// Applies one assembled instruction (its ack has already been processed by the caller).
    /// Afterwards call [`Receiver::next_unparked`] until it returns `None`.
    pub fn receive(&mut self, now: Instant, instruction: Instruction) -> Outcome {
        if self.holds(instruction.new_num) {
            return Outcome::Duplicate;
        }
        if !self.holds(instruction.old_num) {
            let superseded = instruction.new_num < self.newest_num();
            let base_gone =
                self.states.first().is_some_and(|oldest| instruction.old_num < oldest.num);
            return if superseded {
                Outcome::Stale
            } else if instruction.diff.is_empty() {
                Outcome::AckOnUnknownBase
            } else if base_gone || self.policy == ReceivePolicy::NewestOnly {
                self.missing_base(instruction.old_num)
            } else {
                self.park(instruction)
            };
        }
        self.apply(now, &instruction)
    }

    /// Applies, or gives up, one parked instruction whose fate is now decided. Returns its new
    /// state number and outcome.
    pub fn next_unparked(&mut self, now: Instant) -> Option<(StateNum, Outcome)> {
        let newest = self.newest_num();
        let index = self
            .parked
            .iter()
            .position(|p| self.holds(p.old_num) || self.holds(p.new_num) || p.new_num < newest)?;
        let instruction = self.parked.remove(index);
        let outcome = if self.holds(instruction.old_num) && !self.holds(instruction.new_num) {
            self.apply(now, &instruction)
        } else {
            // Superseded or filled in by a retransmission before its base came: the base never
            // arrived (had it arrived, the instruction would have been applied right then).
            Outcome::LostBase
        };
        Some((instruction.new_num, outcome))
    }

    /// Why a base is not held: we threw it away, or it never came.
    fn missing_base(&self, old_num: StateNum) -> Outcome {
        if self.discarded.contains(&old_num) { Outcome::UnknownBase } else { Outcome::LostBase }
    }

    /// Parks an instruction; a full lot gives up its oldest.
    fn park(&mut self, instruction: Instruction) -> Outcome {
        if self
            .parked
            .iter()
            .any(|p| p.new_num == instruction.new_num && p.old_num == instruction.old_num)
        {
            return Outcome::Duplicate;
        }
        if self.parked.len() >= PARKED_CAP {
            self.parked.remove(0);
            self.parked.push(instruction);
            return Outcome::LostBase;
        }
        self.parked.push(instruction);
        Outcome::Parked
    }

    fn apply(&mut self, now: Instant, instruction: &Instruction) -> Outcome {
        let Some(base_index) = self.states.iter().position(|s| s.num == instruction.old_num) else {
            return Outcome::UnknownBase;
        };
        let new_num = instruction.new_num;
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
        while self.states.first().is_some_and(|oldest| oldest.num < throwaway) {
            let gone = self.states.remove(0);
            if self.discarded.len() == DISCARDED_MEMORY {
                self.discarded.pop_front();
            }
            self.discarded.push_back(gone.num);
        }

        let entry = ReceivedState { num: new_num, arrived: now, state };
        let position = self.states.partition_point(|s| s.num < new_num);
        let is_newest = position == self.states.len();
        self.states.insert(position, entry);
        if is_newest {
            Outcome::Newest { had_diff: !instruction.diff.is_empty(), base_was_newest }
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
