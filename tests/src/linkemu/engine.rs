//! The part of the emulator that does not care what carries the packets: per direction a shaper,
//! a release heap and a scheduler that hands each packet on at its release time, plus the
//! counters, the tap and the stop flag. The UDP proxy (`mod.rs`) and the TUN reflector (`tun/`)
//! feed it arrivals and say how a released packet is sent; `R` is their per-packet route.

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::shaper::{PACKET_OVERHEAD_BYTES, Shaper};
use super::tap::{Fate, Tap, TapRecord, TapSlot};
use super::{Dir, DirectionConfig, DirectionStats, LinkError};

/// What the bytes handed to [`Engine::arrive`] are, so the bottleneck counts what a real wire
/// would carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// UDP payloads: the shaper adds [`PACKET_OVERHEAD_BYTES`] of IPv4 + UDP header.
    UdpPayload,
    /// Whole IP packets: their length is already the wire length.
    IpPacket,
}

#[derive(Debug, Default)]
struct Counters {
    received: AtomicU64,
    forwarded: AtomicU64,
    forwarded_bytes: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_queue: AtomicU64,
    duplicated: AtomicU64,
    send_errors: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> DirectionStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DirectionStats {
            received: get(&self.received),
            forwarded: get(&self.forwarded),
            forwarded_bytes: get(&self.forwarded_bytes),
            dropped_loss: get(&self.dropped_loss),
            dropped_queue: get(&self.dropped_queue),
            duplicated: get(&self.duplicated),
            send_errors: get(&self.send_errors),
        }
    }
}

pub(super) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

#[derive(Debug)]
struct Pending<R> {
    release: Instant,
    /// When the packet reached the emulator (for the tap).
    arrived: Instant,
    /// Arrival order; breaks ties so equal release times keep FIFO order.
    seq: u64,
    data: Arc<[u8]>,
    route: R,
}

impl<R> PartialEq for Pending<R> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl<R> Eq for Pending<R> {}
impl<R> PartialOrd for Pending<R> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<R> Ord for Pending<R> {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (self.release, self.seq).cmp(&(other.release, other.seq))
    }
}

#[derive(Debug)]
struct DirState<R> {
    shaper: Shaper,
    heap: BinaryHeap<Reverse<Pending<R>>>,
    next_seq: u64,
}

/// One direction: its shaper and release heap under one lock, a condvar to wake its scheduler.
#[derive(Debug)]
struct Direction<R> {
    state: Mutex<DirState<R>>,
    wake: Condvar,
    counters: Counters,
}

impl<R> Direction<R> {
    fn new(config: DirectionConfig, seed: u64) -> Self {
        Self {
            state: Mutex::new(DirState {
                shaper: Shaper::new(config, seed),
                heap: BinaryHeap::new(),
                next_seq: 0,
            }),
            wake: Condvar::new(),
            counters: Counters::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, DirState<R>> {
        // A poisoned lock means a thread of ours panicked; the state is still usable counters and
        // queues, and tests want the remaining threads to keep going rather than cascade.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Both directions of one emulated link.
#[derive(Debug)]
pub(super) struct Engine<R> {
    up: Direction<R>,
    down: Direction<R>,
    framing: Framing,
    stop: AtomicBool,
    tap: TapSlot,
}

impl<R> Engine<R> {
    /// Checks both configurations and builds the directions, their draws seeded from `seed`.
    pub(super) fn new(
        up: DirectionConfig,
        down: DirectionConfig,
        seed: u64,
        framing: Framing,
    ) -> Result<Self, LinkError> {
        up.validate("up")?;
        down.validate("down")?;
        // Distinct streams per direction so changing one direction's config leaves the other's
        // draws as they were.
        Ok(Self {
            up: Direction::new(up, seed),
            down: Direction::new(down, seed ^ 0x9E37_79B9_7F4A_7C15),
            framing,
            stop: AtomicBool::new(false),
            tap: TapSlot::default(),
        })
    }

    fn direction(&self, dir: Dir) -> &Direction<R> {
        match dir {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Sets the stop flag and wakes both schedulers; the caller joins its threads afterwards.
    pub(super) fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        for dir in [Dir::Up, Dir::Down] {
            let d = self.direction(dir);
            // Taking the lock orders the notify after any scheduler's check of the flag.
            let _guard = d.lock();
            d.wake.notify_all();
        }
    }

    pub(super) fn stats(&self, dir: Dir) -> DirectionStats {
        self.direction(dir).counters.snapshot()
    }

    pub(super) fn config(&self, dir: Dir) -> DirectionConfig {
        self.direction(dir).lock().shaper.config().clone()
    }

    pub(super) fn set_config(&self, dir: Dir, config: DirectionConfig) -> Result<(), LinkError> {
        config.validate(match dir {
            Dir::Up => "up",
            Dir::Down => "down",
        })?;
        self.direction(dir).lock().shaper.set_config(config);
        Ok(())
    }

    pub(super) fn set_tap(&self, tap: Option<Arc<dyn Tap>>) {
        self.tap.set(tap);
    }

    /// Runs one arriving packet through the shaper and queues the surviving copies.
    pub(super) fn arrive(&self, dir: Dir, data: &[u8], route: impl Fn() -> R) {
        let d = self.direction(dir);
        let now = Instant::now();
        bump(&d.counters.received, 1);
        let wire_bytes = match self.framing {
            Framing::UdpPayload => data.len() + PACKET_OVERHEAD_BYTES,
            Framing::IpPacket => data.len(),
        };
        let mut st = d.lock();
        let admission = st.shaper.admit_wire(now, wire_bytes);
        let dropped = |fate| {
            self.tap.emit(|| TapRecord { dir, arrived: now, fate, data: Arc::from(data) });
        };
        if admission.lost {
            bump(&d.counters.dropped_loss, 1);
            drop(st);
            dropped(Fate::DroppedLoss);
            return;
        }
        if admission.duplicated {
            bump(&d.counters.duplicated, 1);
        }
        bump(&d.counters.dropped_queue, u64::from(admission.queue_drops));
        if admission.releases.is_empty() {
            drop(st);
            dropped(Fate::DroppedQueue);
            return;
        }
        let data: Arc<[u8]> = Arc::from(data);
        for release in admission.releases {
            let seq = st.next_seq;
            st.next_seq += 1;
            st.heap.push(Reverse(Pending {
                release,
                arrived: now,
                seq,
                data: Arc::clone(&data),
                route: route(),
            }));
        }
        drop(st);
        d.wake.notify_one();
    }

    /// The scheduler of one direction, run on its own thread until [`Engine::request_stop`]:
    /// hands each queued packet to `send` at its release time.
    pub(super) fn release_loop(&self, dir: Dir, send: impl Fn(&R, &[u8]) -> io::Result<usize>) {
        let d = self.direction(dir);
        let mut st = d.lock();
        loop {
            if self.stopping() {
                return;
            }
            let now = Instant::now();
            let next = st.heap.peek().map(|Reverse(p)| p.release);
            match next {
                None => st = d.wake.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(release) if release > now => {
                    st =
                        d.wake.wait_timeout(st, release - now).unwrap_or_else(|e| e.into_inner()).0;
                }
                Some(_) => {
                    let Some(Reverse(p)) = st.heap.pop() else {
                        continue;
                    };
                    // Send without the lock so arrivals are never held up by a slow send.
                    drop(st);
                    // Stamped before the send: the receiver may answer (and the answer arrive
                    // here) before the send call returns, and no answer may look earlier than this.
                    let released = Instant::now();
                    let fate = match send(&p.route, &p.data) {
                        Ok(n) => {
                            bump(&d.counters.forwarded, 1);
                            bump(&d.counters.forwarded_bytes, n as u64);
                            Fate::Forwarded { released }
                        }
                        Err(_) => {
                            bump(&d.counters.send_errors, 1);
                            Fate::SendError
                        }
                    };
                    self.tap.emit(|| TapRecord { dir, arrived: p.arrived, fate, data: p.data });
                    st = d.lock();
                }
            }
        }
    }
}
