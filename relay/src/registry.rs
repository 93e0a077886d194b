//! Who drives each mosh-server, and what the relay keeps of it between pages.
//!
//! One [`Entry`] per mosh-server the relay forwards to (spawn mode: per session id; bridge mode:
//! per target address). Each page that attaches gets an [`Attach`] with a serial number. A page
//! drives from its first datagram on, when it is newer than the one driving (a page that attaches
//! and then finds it cannot continue the session takes nothing away); the older one learns it was
//! moved (its page offers to take the session back, which is a new attach). Every client
//! datagram passes [`Attach::client_datagram`], which is where nonce safety is enforced,
//! whatever the pages do:
//!
//! - only the newest attach's datagrams are forwarded;
//! - spawn mode (the relay knows the key): a datagram is forwarded only if it is authentic and its
//!   sequence number is above every one forwarded to this mosh-server before (a reordered one is
//!   dropped: to mosh that is a lost datagram), so no (direction, sequence number) pair can reach
//!   the server twice under its key, whatever pages do; the bound survives relay restarts: the
//!   record holds `seq_reserved`, raised (on disk, before the datagram goes out) in blocks of
//!   [`SEQ_BLOCK`], and a restarted relay forwards only from there;
//! - bridge mode (the key is the page's): the relay cannot tell a real datagram from garbage, so
//!   it drops none for being below an earlier one (one forged high number would otherwise block
//!   the session), only those below the floor the page was given; it remembers the highest
//!   plausible number forwarded and tells the next page to start above it. That bound survives
//!   restarts too, per target in the state directory ([`BridgeFloors`]), reserved in blocks of
//!   [`SEQ_BLOCK`] before the datagram goes out; a target the relay kept nothing for starts
//!   above every target's reservation and above the clock's floor.
//!
//! In spawn mode an entry also holds the session's [`Shadow`] (the relay knows the key): what a
//! page with nothing saved resumes from, the size and title the session list shows. It is saved to
//! the state directory when it changed (at most every [`SAVE_INTERVAL`]) and when a page leaves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tern::relay_proto::CarriedPoint;
use tern::session::{ClientDatagram, ResumePoint, Shadow};
use tern::wire::Key;
use tokio::sync::watch;

use crate::bridge_floors::BridgeFloors;
use crate::state::{SessionRecord, StateStore};

/// Sequence numbers reserved on disk per write (a write every 65,536 client datagrams).
pub const SEQ_BLOCK: u64 = 1 << 16;
/// A new page's floor is this far above the numbers forwarded when it attached: the page driving
/// until its first datagram goes on meanwhile (milliseconds; nowhere near this many datagrams).
const FLOOR_MARGIN: u64 = 1 << 20;
/// Bridge mode: a number this far above the highest so far is not believed (garbage, not a mosh
/// client, which never skips this far) and does not raise the next page's floor.
const BRIDGE_MAX_JUMP: u64 = 1 << 32;
/// A changed shadow is saved at most this often while a page drives (and when it leaves). A relay
/// killed without warning loses at most this much of the copy (see docs/RELAY.md).
pub const SAVE_INTERVAL: Duration = Duration::from_millis(250);
/// The first bytes of a saved shadow: format and version.
const SHADOW_MAGIC: &[u8; 4] = b"TSH1";

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// Every entry, by name.
#[derive(Debug)]
pub(crate) struct Registry {
    /// The shadows' clock starts here.
    epoch: std::time::Instant,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// Bridge mode's reservations (see the module documentation).
    bridge_floors: Arc<BridgeFloors>,
}

/// One mosh-server's drivers and copy.
#[derive(Debug)]
pub(crate) struct Entry {
    name: String,
    state: Mutex<EntryState>,
    /// The serial of the attach that drives now (0: none yet).
    driver: watch::Sender<u64>,
    /// Bumped whenever the copy's screen changes: viewers render from it.
    screen: watch::Sender<u64>,
    /// How many viewers watch (the owner's page shows it).
    viewers: watch::Sender<u32>,
}

#[derive(Debug)]
struct EntryState {
    /// The newest attach's serial (0: none yet).
    attaches: u64,
    /// The serial of the attach that drives (the newest that sent a datagram).
    driver: u64,
    /// Whether the driving page is still connected.
    attached: bool,
    /// The lowest sequence number that may still be forwarded.
    next_seq: u64,
    /// The bound on disk: spawn mode's `SessionRecord::seq_reserved`, bridge mode's
    /// [`BridgeFloors`] reservation.
    reserved: Option<u64>,
    /// Bridge mode: a page sent to the target through this relay since it started (a page with
    /// nothing saved cannot continue it). Not kept across restarts: mosh-servers reuse ports,
    /// and a new server on a used port is a new session for any page.
    known: bool,
    key: Option<Key>,
    /// Spawn mode: the relay's copy (it also authenticates client datagrams).
    shadow: Option<Shadow>,
    /// Whether the copy follows the session (false for one started blank after a relay restart
    /// with no saved copy, until a page seeds it): only then is it offered and listed.
    copy_valid: bool,
    /// Unix seconds of the last datagram from a page.
    last_active: u64,
    /// Datagrams not forwarded because their sequence number was not above every earlier one,
    /// or (spawn mode) because they did not authenticate.
    dropped_seq: u64,
    /// Datagrams not forwarded because a newer page drives.
    dropped_moved: u64,
    /// The last client datagram forwarded, opened, for the copy to take in once it is on its way
    /// ([`Attach::after_forward`]): the copy's work never delays a keystroke.
    unabsorbed: Option<ClientDatagram>,
}

/// What happens to a client datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Forward,
    /// Not above every number forwarded before: dropped.
    Stale,
    /// A newer page drives: dropped, and this page is told.
    Moved,
}

/// One page's hold on a mosh-server (see the module documentation).
#[derive(Debug)]
pub(crate) struct Attach {
    entry: Arc<Entry>,
    serial: u64,
    /// Where this page's sequence numbers must start (`ready.seq_floor`).
    pub seq_floor: u64,
    /// Bridge mode: the server has had a page through this relay (`ready.resumed`).
    pub known: bool,
    /// Another page drove the session when this one attached: a take-over (the audit trail).
    pub took_over: bool,
    /// Bridge mode: where the target's reservations are kept, and its name there.
    bridge: Option<(Arc<BridgeFloors>, String)>,
    /// Spawn mode, resuming: the shadow's point for `ready.point`.
    pub point: Option<CarriedPoint>,
    moved: watch::Receiver<u64>,
    epoch: std::time::Instant,
    last_save: Mutex<std::time::Instant>,
}

impl Registry {
    /// Bridge reservations in memory only.
    #[cfg(test)]
    pub fn new() -> Self {
        Self::with_bridge_floors(BridgeFloors::in_memory())
    }

    pub fn with_bridge_floors(bridge_floors: BridgeFloors) -> Self {
        Registry {
            epoch: std::time::Instant::now(),
            entries: Mutex::default(),
            bridge_floors: Arc::new(bridge_floors),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> tern::time::Instant {
        tern::time::Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    /// The entry of a spawned session, created from its record (and saved copy) when the relay
    /// first hears of it. `new_spawn`: the server was spawned just now, so the copy starts blank.
    fn spawned(&self, store: &StateStore, record: &SessionRecord, new_spawn: bool) -> Arc<Entry> {
        self.spawned_from(store, record, new_spawn, None)
    }

    /// [`spawned`](Self::spawned); `first`: where the relay's own client of the new server (a
    /// pre-started spare) stopped, the copy's start.
    fn spawned_from(
        &self,
        store: &StateStore,
        record: &SessionRecord,
        new_spawn: bool,
        first: Option<&ResumePoint>,
    ) -> Arc<Entry> {
        let mut entries = self.lock();
        if let Some(e) = entries.get(&record.id) {
            return Arc::clone(e);
        }
        let key = record.key.parse::<Key>().ok();
        let now = self.now();
        let saved = if new_spawn { None } else { store.load_shadow(&record.id) };
        let restored = key.as_ref().and_then(|k| {
            if let Some(point) = first {
                return Some((Shadow::from_point(k, point, now).ok()?, record.created));
            }
            let (point, last_active) = decode_saved(saved.as_deref()?)?;
            Some((Shadow::from_point(k, &point, now).ok()?, last_active))
        });
        let (shadow, copy_valid, last_active) = match (restored, &key) {
            (Some((shadow, last_active)), _) => (Some(shadow), true, last_active),
            (None, Some(k)) => (Some(Shadow::new(k, now)), new_spawn, record.created),
            (None, None) => (None, false, record.created),
        };
        let entry = Arc::new(Entry {
            name: record.id.clone(),
            state: Mutex::new(EntryState {
                attaches: 0,
                driver: 0,
                attached: false,
                next_seq: record.seq_reserved,
                reserved: Some(record.seq_reserved),
                known: false,
                key,
                shadow,
                copy_valid,
                last_active,
                dropped_seq: 0,
                dropped_moved: 0,
                unabsorbed: None,
            }),
            driver: watch::Sender::new(0),
            screen: watch::Sender::new(0),
            viewers: watch::Sender::new(0),
        });
        entries.insert(record.id.clone(), Arc::clone(&entry));
        entry
    }

    /// A page attaches to a spawned session (it drives from its first datagram). `resuming`: it
    /// asked for an existing session (it gets the shadow's point).
    pub fn attach_spawned(
        &self,
        store: &StateStore,
        record: &SessionRecord,
        resuming: bool,
    ) -> Attach {
        let entry = self.spawned(store, record, !resuming);
        self.attach(entry, resuming)
    }

    /// A page attaches to a new session whose shell the relay released as its first client (a
    /// pre-started warm spare): like a resume, it continues from the relay's copy, which starts
    /// at `first`. The record's `seq_reserved` is at or above `first.next_seq` (every number the
    /// relay's client used), so the page's floor is above them all.
    pub fn attach_prestarted(
        &self,
        store: &StateStore,
        record: &SessionRecord,
        first: &ResumePoint,
    ) -> Attach {
        let entry = self.spawned_from(store, record, true, Some(first));
        self.attach(entry, true)
    }

    /// A page attaches to a mosh-server named in bridge mode (the key is the page's: the relay
    /// keeps only the sequence reservation of the target and, when the page names it, the key's
    /// fingerprint `key_id`). A server and key this relay's state directory has a reservation
    /// for counts as known (used before) across restarts; without a fingerprint, only since
    /// this relay started (ports are reused by new servers with new keys).
    pub fn attach_bridge(&self, target: std::net::SocketAddr, key_id: Option<&str>) -> Attach {
        let floors_name = match key_id {
            Some(id) => format!("{target}/{id}"),
            None => target.to_string(),
        };
        let name = format!("bridge:{floors_name}");
        let entry = Arc::clone(self.lock().entry(name.clone()).or_insert_with(|| {
            let start = self.bridge_floors.start(&floors_name, unix_now());
            let used_before = key_id.is_some() && self.bridge_floors.has(&floors_name);
            Arc::new(Entry {
                name,
                state: Mutex::new(EntryState {
                    attaches: 0,
                    driver: 0,
                    attached: false,
                    next_seq: start,
                    reserved: Some(start),
                    known: used_before,
                    key: None,
                    shadow: None,
                    copy_valid: false,
                    last_active: unix_now(),
                    dropped_seq: 0,
                    dropped_moved: 0,
                    unabsorbed: None,
                }),
                driver: watch::Sender::new(0),
                screen: watch::Sender::new(0),
                viewers: watch::Sender::new(0),
            })
        }));
        let mut attach = self.attach(entry, false);
        attach.bridge = Some((Arc::clone(&self.bridge_floors), floors_name));
        attach
    }

    fn attach(&self, entry: Arc<Entry>, resuming: bool) -> Attach {
        let (serial, seq_floor, known, point, took_over) = {
            let mut st = entry.lock();
            st.attaches += 1;
            // Above everything forwarded, with room for what the driving page sends until this one
            // takes over; 0 only for a server nobody used through this relay.
            let used = st.driver != 0 || st.next_seq != 0;
            let floor = if used { st.next_seq.saturating_add(FLOOR_MARGIN) } else { 0 };
            let point = if resuming && st.copy_valid {
                st.shadow.as_ref().and_then(|s| match s.resume_point() {
                    Ok(p) => Some(CarriedPoint::from(ResumePoint { next_seq: floor, ..p })),
                    Err(e) => {
                        tracing::info!(session = %entry.name, "no resume point from the relay's copy: {e}");
                        None
                    }
                })
            } else {
                None
            };
            let known = st.known || st.driver != 0;
            (st.attaches, floor, known, point, st.attached)
        };
        let moved = entry.driver.subscribe();
        Attach {
            entry,
            serial,
            seq_floor,
            known,
            took_over,
            bridge: None,
            point,
            moved,
            epoch: self.epoch,
            last_save: Mutex::new(std::time::Instant::now()),
        }
    }

    /// What `/api/sessions` shows of a spawned session: size and title (0x0 and empty when the
    /// relay has no copy), last activity, whether a page drives it.
    pub fn summary(&self, store: &StateStore, record: &SessionRecord) -> Summary {
        let entry = self.spawned(store, record, false);
        let st = entry.lock();
        let shown = st.shadow.as_ref().filter(|_| st.copy_valid).map(Shadow::summary);
        Summary {
            cols: shown.as_ref().map_or(0, |s| s.cols),
            rows: shown.as_ref().map_or(0, |s| s.rows),
            title: shown.map(|s| s.title).unwrap_or_default(),
            last_active: st.last_active,
            attached: st.attached,
        }
    }

    /// The screen size of the spawned session a page used last (the relay's copy of it): the
    /// size the next warm spare's shell is started at, so that a page like the last one finds
    /// its size already applied (no SIGWINCH at its first prompt).
    pub fn latest_size(&self) -> Option<(u16, u16)> {
        let entries: Vec<Arc<Entry>> = self.lock().values().cloned().collect();
        entries
            .iter()
            .filter_map(|entry| {
                let st = entry.lock();
                let shown = st.shadow.as_ref().filter(|_| st.copy_valid)?.summary();
                Some(((st.last_active, st.attached), (shown.cols, shown.rows)))
            })
            .max_by_key(|(when, _)| *when)
            .map(|(_, size)| size)
    }

    /// Saves every changed copy now (the relay is stopping).
    pub fn save_all(&self, store: &StateStore) {
        let entries: Vec<Arc<Entry>> = self.lock().values().cloned().collect();
        for entry in entries {
            entry.save(store);
        }
    }

    /// A viewer of a spawned session (`None` without a copy to show): counted while it lives.
    pub fn watch(&self, store: &StateStore, record: &SessionRecord) -> Option<Watch> {
        let entry = self.spawned(store, record, false);
        entry.lock().shadow.as_ref()?;
        entry.viewers.send_modify(|n| *n += 1);
        let screen = entry.screen.subscribe();
        Some(Watch { entry, screen })
    }

    /// Forgets every spawned entry whose session is not in `alive` (its server exited).
    pub fn retain_spawned(&self, alive: &[SessionRecord]) {
        self.lock()
            .retain(|name, _| name.starts_with("bridge:") || alive.iter().any(|r| &r.id == name));
    }
}

/// One viewer's hold on a session's copy ([`Registry::watch`]).
#[derive(Debug)]
pub(crate) struct Watch {
    entry: Arc<Entry>,
    /// Changes whenever the copy's screen does.
    pub screen: watch::Receiver<u64>,
}

impl Watch {
    /// The session's screen now (`None` while the copy does not follow the session: a relay
    /// restarted with no saved copy, until the owner's page seeds it).
    pub fn snapshot(&self) -> Option<tern::terminal::Framebuffer> {
        let st = self.entry.lock();
        st.shadow.as_ref().filter(|_| st.copy_valid).map(|s| s.framebuffer().clone())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.entry.viewers.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Resolves when a newer page took a session over (see [`Attach::moved_signal`]).
#[derive(Debug)]
pub(crate) struct MovedSignal {
    rx: watch::Receiver<u64>,
    serial: u64,
}

impl MovedSignal {
    pub async fn fired(&mut self) {
        loop {
            if *self.rx.borrow_and_update() > self.serial {
                return;
            }
            if self.rx.changed().await.is_err() {
                // The entry is gone (cannot happen while an attach holds it): never resolve.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// See [`Registry::summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub cols: u16,
    pub rows: u16,
    pub title: String,
    pub last_active: u64,
    pub attached: bool,
}

impl Entry {
    fn lock(&self) -> MutexGuard<'_, EntryState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Saves the copy if it changed since the last save.
    fn save(&self, store: &StateStore) {
        let bytes = {
            let mut st = self.lock();
            let last_active = st.last_active;
            let Some(shadow) = st.shadow.as_mut() else { return };
            if !shadow.take_changed() {
                return;
            }
            match shadow.resume_point() {
                Ok(point) => encode_saved(&point, last_active),
                Err(_) => return,
            }
        };
        if let Err(e) = store.save_shadow(&self.name, &bytes) {
            tracing::warn!(session = %self.name, "cannot save the session's copy: {e:#}");
        }
    }
}

/// The sequence number in a datagram's clear nonce (its first 8 bytes, direction bit on top).
pub(crate) fn datagram_seq(datagram: &[u8]) -> Option<u64> {
    let nonce: [u8; 8] = datagram.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(nonce) & !(1 << 63))
}

impl Attach {
    fn now(&self) -> tern::time::Instant {
        tern::time::Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    /// A datagram from this attach's page: forward it or not (see the module documentation).
    /// `store`: spawn mode's state directory, for the sequence reservation.
    pub fn client_datagram(&self, store: Option<&StateStore>, datagram: &[u8]) -> Verdict {
        let now = self.now();
        let mut st = self.entry.lock();
        if st.driver > self.serial {
            st.dropped_moved += 1;
            return Verdict::Moved;
        }
        if st.driver < self.serial {
            // This page takes over; the one driving until now is told (its loop watches this).
            st.driver = self.serial;
            st.attached = true;
            self.entry.driver.send_replace(self.serial);
        }
        st.last_active = unix_now();
        let st = &mut *st;
        let Some(shadow) = st.shadow.as_mut() else {
            return self.bridge_datagram(st, datagram);
        };
        let Ok(opened) = shadow.open_client(now, datagram) else {
            st.dropped_seq += 1;
            return Verdict::Stale;
        };
        let seq = opened.seq;
        if seq < st.next_seq {
            st.dropped_seq += 1;
            return Verdict::Stale;
        }
        if let (Some(reserved), Some(store)) = (st.reserved, store) {
            if seq >= reserved {
                let bound = seq.saturating_add(SEQ_BLOCK);
                // On disk before the datagram goes out: a relay restarted after this forwards
                // nothing numbered below `bound`.
                if let Err(e) = store.reserve_seq(&self.entry.name, bound) {
                    tracing::error!(session = %self.entry.name, "cannot reserve sequence numbers: {e:#}; not forwarding");
                    st.dropped_seq += 1;
                    return Verdict::Stale;
                }
                st.reserved = Some(bound);
            }
        }
        st.next_seq = seq + 1;
        st.unabsorbed = Some(opened);
        Verdict::Forward
    }

    /// Bridge mode: forwarded unless below this page's floor (numbers another page, or a relay
    /// before a restart, may have used); a plausible number raises the next page's floor, on
    /// disk first when it passes the reservation.
    fn bridge_datagram(&self, st: &mut EntryState, datagram: &[u8]) -> Verdict {
        let Some(seq) = datagram_seq(datagram) else {
            // Too short to carry a nonce: nothing to reuse.
            return Verdict::Forward;
        };
        if seq < self.seq_floor {
            st.dropped_seq += 1;
            return Verdict::Stale;
        }
        if seq < st.next_seq || seq - st.next_seq >= BRIDGE_MAX_JUMP {
            // Below what went before (reordered), or garbage far above: forwarded, no floor moves.
            return Verdict::Forward;
        }
        if let (Some(reserved), Some((floors, target))) = (st.reserved, &self.bridge) {
            if seq >= reserved {
                let bound = seq.saturating_add(SEQ_BLOCK);
                // On disk before the datagram goes out: a relay restarted after this tells every
                // page to start at `bound` or above.
                if let Err(e) = floors.reserve(target, bound, unix_now()) {
                    tracing::error!(session = %self.entry.name, "cannot reserve sequence numbers: {e:#}; not forwarding");
                    st.dropped_seq += 1;
                    return Verdict::Stale;
                }
                st.reserved = Some(bound);
            }
        }
        st.known = true;
        st.next_seq = seq + 1;
        Verdict::Forward
    }

    /// After a forwarded client datagram went out: the copy takes it in (inflating, applying).
    pub fn after_forward(&self) {
        let now = self.now();
        let mut st = self.entry.lock();
        let st = &mut *st;
        if let (Some(opened), Some(shadow)) = (st.unabsorbed.take(), st.shadow.as_mut()) {
            shadow.absorb_client(now, opened);
        }
    }

    /// A read-only link: whether the datagram [`client_datagram`](Self::client_datagram) just
    /// let through carries input or a resize ([`ClientDatagram::carries_input`]); if so it
    /// must not be forwarded, and the relay's copy does not see it either. In bridge mode the
    /// relay has no key and cannot tell: every datagram counts as input.
    pub fn refuse_input(&self) -> bool {
        let mut st = self.entry.lock();
        let input = match (&st.unabsorbed, &st.shadow) {
            (Some(opened), Some(_)) => opened.carries_input(),
            _ => true,
        };
        if input {
            st.unabsorbed = None;
        }
        input
    }

    /// A datagram from the server, once forwarded to this attach's page.
    pub fn server_datagram(&self, datagram: &[u8]) {
        let now = self.now();
        let mut st = self.entry.lock();
        let valid = st.copy_valid;
        if st.driver == self.serial {
            if let Some(shadow) = st.shadow.as_mut() {
                let before = shadow.screen_num();
                shadow.server_datagram(now, datagram);
                if shadow.screen_num() != before && valid {
                    self.entry.screen.send_modify(|n| *n += 1);
                }
            }
        }
    }

    /// How many viewers watch this session (changes as they come and go).
    pub fn viewers(&self) -> watch::Receiver<u32> {
        self.entry.viewers.subscribe()
    }

    /// The page continues from a point of its own (a reload): the relay's copy adopts it where it
    /// is newer (after a relay restart it may be older), or starts from it when there is none.
    pub fn seed(&self, carried: &CarriedPoint) {
        let Some(point) = carried.point() else {
            tracing::info!(session = %self.entry.name, "ignoring a seed that does not decode");
            return;
        };
        let now = self.now();
        let mut st = self.entry.lock();
        if st.driver > self.serial {
            return;
        }
        let Some(key) = st.key.clone() else { return };
        let valid = st.copy_valid;
        match st.shadow.as_mut() {
            Some(shadow) if valid => {
                shadow.seed(&key, point, now);
            }
            _ => {
                // A blank copy (a relay restart with none saved) becomes the page's. Sequence
                // numbers stay the registry's: they only ever go up.
                if let Ok(seeded) = Shadow::from_point(&key, point, now) {
                    st.shadow = Some(seeded);
                    st.copy_valid = true;
                }
            }
        }
        // Viewers look again (a copy that just became valid, or a newer screen).
        self.entry.screen.send_modify(|n| *n += 1);
    }

    /// What resolves when a newer page takes over.
    pub fn moved_signal(&self) -> MovedSignal {
        MovedSignal { rx: self.moved.clone(), serial: self.serial }
    }

    /// Saves the copy when it changed, at most every [`SAVE_INTERVAL`] unless `now_anyway`.
    pub fn save(&self, store: &StateStore, now_anyway: bool) {
        {
            let mut last = self.last_save.lock().unwrap_or_else(|e| e.into_inner());
            if !now_anyway && last.elapsed() < SAVE_INTERVAL {
                return;
            }
            *last = std::time::Instant::now();
        }
        self.entry.save(store);
    }

    /// Counters for the log when the page goes.
    pub fn dropped(&self) -> (u64, u64) {
        let st = self.entry.lock();
        (st.dropped_seq, st.dropped_moved)
    }
}

impl Drop for Attach {
    fn drop(&mut self) {
        let mut st = self.entry.lock();
        if st.driver == self.serial {
            st.attached = false;
        }
    }
}

/// A saved shadow: magic, last activity (unix seconds, little-endian), the point.
fn encode_saved(point: &ResumePoint, last_active: u64) -> Vec<u8> {
    let mut out = SHADOW_MAGIC.to_vec();
    out.extend_from_slice(&last_active.to_le_bytes());
    out.extend_from_slice(&point.encode());
    out
}

fn decode_saved(bytes: &[u8]) -> Option<(ResumePoint, u64)> {
    let rest = bytes.strip_prefix(SHADOW_MAGIC)?;
    let (when, point) = rest.split_at_checked(8)?;
    let last_active = u64::from_le_bytes(when.try_into().ok()?);
    Some((ResumePoint::decode(point).ok()?, last_active))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "zr0jtuYVKJnfJHP/XOOsbQ";

    /// An authentic client datagram numbered `seq` (its content does not matter here).
    fn datagram(seq: u64) -> Vec<u8> {
        let key: Key = KEY.parse().unwrap();
        let mut packets =
            tern::wire::PacketLayer::with_next_seq(&key, tern::wire::Direction::ToServer, seq);
        packets.seal(tern::time::Instant::ZERO, &[0; 12]).unwrap()
    }

    /// The same number, not sealed under the key.
    fn forged(seq: u64) -> Vec<u8> {
        let mut d = seq.to_be_bytes().to_vec();
        d.extend_from_slice(&[0; 30]);
        d
    }

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            port: 1,
            key: KEY.into(),
            pid: None,
            created: 5,
            seq_reserved: 0,
            remote: None,
            owner: None,
        }
    }

    /// A warm spare whose shell the relay started (its own client used the first sequence
    /// numbers): the page continues from the relay's point, numbering above every one of them.
    #[test]
    fn a_prestarted_session_is_continued_from_the_relays_point_above_its_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let mut pre =
            tern::session::Prestart::new(KEY.parse().unwrap(), 101, 37, tern::time::Instant::ZERO);
        pre.handle_timeout(tern::time::Instant::from_millis(5));
        let mut sent = 0;
        while pre.poll_transmit().is_some() {
            sent += 1;
        }
        assert!(sent > 0, "the first state went out");
        let point = pre.hand_over();
        let r = SessionRecord { seq_reserved: point.next_seq, ..record("00000000cccccccc") };
        store.insert(r.clone()).unwrap();
        let reg = Registry::new();
        assert_eq!(reg.latest_size(), None);
        let page = reg.attach_prestarted(&store, &r, &point);
        let given = page.point.as_ref().and_then(CarriedPoint::point).expect("the relay's point");
        assert!(page.seq_floor > point.next_seq, "{} <= {}", page.seq_floor, point.next_seq);
        assert_eq!(given.next_seq, page.seq_floor);
        assert_eq!(given.input_next, point.input_next, "states numbered after the relay's");
        assert!(!page.known, "a new session, not a resumed one");
        assert_eq!(reg.latest_size(), Some((101, 37)));
        // The relay's own numbers are never forwarded again; the page's are.
        assert_eq!(page.client_datagram(Some(&store), &datagram(0)), Verdict::Stale);
        assert_eq!(page.client_datagram(Some(&store), &datagram(page.seq_floor)), Verdict::Forward);
    }

    #[test]
    fn only_the_newest_page_is_forwarded_and_only_rising_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        store.insert(record("00000000aaaaaaaa")).unwrap();
        let reg = Registry::new();
        let r = store.get("00000000aaaaaaaa").unwrap();
        let first = reg.attach_spawned(&store, &r, false);
        assert_eq!(first.seq_floor, 0);
        for seq in [0, 1, 5] {
            assert_eq!(first.client_datagram(Some(&store), &datagram(seq)), Verdict::Forward);
        }
        // A repeat, a reordered one: never passed on.
        assert_eq!(first.client_datagram(Some(&store), &datagram(5)), Verdict::Stale);
        assert_eq!(first.client_datagram(Some(&store), &datagram(3)), Verdict::Stale);
        let second = reg.attach_spawned(&store, &r, true);
        let floor = second.seq_floor;
        assert_eq!(floor, 6 + FLOOR_MARGIN, "above every number forwarded, with room");
        // Until the new page sends, the old one still drives (a page that attaches and then
        // cannot continue takes nothing away).
        assert_eq!(first.client_datagram(Some(&store), &datagram(100)), Verdict::Forward);
        assert_eq!(second.client_datagram(Some(&store), &datagram(floor)), Verdict::Forward);
        assert_eq!(first.client_datagram(Some(&store), &datagram(floor + 10)), Verdict::Moved);
        assert_eq!(second.client_datagram(Some(&store), &datagram(5)), Verdict::Stale);
        // A forged high number is not forwarded and does not block the real ones after it.
        assert_eq!(second.client_datagram(Some(&store), &forged(1 << 40)), Verdict::Stale);
        assert_eq!(second.client_datagram(Some(&store), &datagram(floor + 1)), Verdict::Forward);
        assert_eq!(first.dropped(), (4, 1));
        // The reservation is on disk: a restarted relay starts above it.
        let reserved = store.get("00000000aaaaaaaa").unwrap().seq_reserved;
        assert!(reserved > 6, "{reserved}");
        let restarted = Registry::new();
        store.release_lock();
        let store2 = StateStore::open(dir.path()).unwrap();
        let r2 = store2.get("00000000aaaaaaaa").unwrap();
        let third = restarted.attach_spawned(&store2, &r2, true);
        assert_eq!(third.seq_floor, reserved + FLOOR_MARGIN);
        assert_eq!(third.client_datagram(Some(&store2), &datagram(floor + 2)), Verdict::Stale);
        assert_eq!(third.client_datagram(Some(&store2), &datagram(reserved)), Verdict::Forward);
    }

    #[tokio::test]
    async fn the_older_page_learns_it_was_moved() {
        let reg = Registry::new();
        let target = "127.0.0.1:60001".parse().unwrap();
        let first = reg.attach_bridge(target, None);
        let floor = first.seq_floor;
        assert!(floor >= crate::bridge_floors::time_floor(unix_now()), "above the clock's floor");
        assert!(!first.known, "nobody used this server through the relay");
        let mut signal = first.moved_signal();
        // Bridge mode cannot authenticate: everything of the driving page at or above its floor
        // goes through, and a plausible number raises the next page's floor (an absurd one does
        // not). Below the floor: numbers someone else may have used.
        assert_eq!(first.client_datagram(None, &forged(floor - 1)), Verdict::Stale);
        assert_eq!(first.client_datagram(None, &forged(floor + 40)), Verdict::Forward);
        assert_eq!(first.client_datagram(None, &forged(1 << 62)), Verdict::Forward);
        let second = reg.attach_bridge(target, None);
        assert_eq!(second.seq_floor, floor + 41 + FLOOR_MARGIN);
        assert!(second.known);
        assert_eq!(second.client_datagram(None, &forged(second.seq_floor)), Verdict::Forward);
        tokio::time::timeout(Duration::from_secs(1), signal.fired()).await.expect("told");
        assert_eq!(first.client_datagram(None, &forged(floor + 41)), Verdict::Moved);
    }

    #[test]
    fn bridge_floors_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let target = "127.0.0.1:60001".parse().unwrap();
        let reg = Registry::with_bridge_floors(BridgeFloors::open(dir.path()).unwrap());
        let page = reg.attach_bridge(target, None);
        // Far above the clock's floor, as a session that ran for a long time.
        let high = page.seq_floor + (1 << 30);
        assert_eq!(page.client_datagram(None, &forged(page.seq_floor)), Verdict::Forward);
        assert_eq!(page.client_datagram(None, &forged(high)), Verdict::Forward);
        drop(page);
        drop(reg);
        let restarted = Registry::with_bridge_floors(BridgeFloors::open(dir.path()).unwrap());
        let next = restarted.attach_bridge(target, None);
        assert!(next.seq_floor > high, "{} <= {high}", next.seq_floor);
        // Which server had a page is not kept (a new server may use the port): only the floor.
        assert!(!next.known);
        assert_eq!(next.client_datagram(None, &forged(high)), Verdict::Stale);
        // Another server: above every reservation too, but nobody used it.
        let other = restarted.attach_bridge("127.0.0.1:60002".parse().unwrap(), None);
        assert!(other.seq_floor > high && !other.known);
    }

    /// With the key's fingerprint the relay keeps each server-and-key's floor, and knows after a
    /// restart that this server and key had a page (so a fresh page cannot resume it), while a
    /// new server on the same port under another key starts fresh and above it all.
    #[test]
    fn bridge_floors_are_kept_per_server_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let target = "127.0.0.1:60001".parse().unwrap();
        let (key_a, key_b) = ("a".repeat(32), "b".repeat(32));
        let reg = Registry::with_bridge_floors(BridgeFloors::open(dir.path()).unwrap());
        let page = reg.attach_bridge(target, Some(&key_a));
        assert!(!page.known);
        let high = page.seq_floor + (1 << 30);
        assert_eq!(page.client_datagram(None, &forged(high)), Verdict::Forward);
        drop(page);
        drop(reg);
        let restarted = Registry::with_bridge_floors(BridgeFloors::open(dir.path()).unwrap());
        let again = restarted.attach_bridge(target, Some(&key_a));
        assert!(again.seq_floor > high && again.known, "the same server and key, after a restart");
        let new_server = restarted.attach_bridge(target, Some(&key_b));
        assert!(new_server.seq_floor > high && !new_server.known, "another key on the port");
    }

    #[test]
    fn a_saved_copy_round_trips_and_garbage_is_no_copy() {
        let shadow = Shadow::new(&KEY.parse().unwrap(), tern::time::Instant::ZERO);
        let point = shadow.resume_point().unwrap();
        let bytes = encode_saved(&point, 77);
        assert_eq!(decode_saved(&bytes), Some((point, 77)));
        assert_eq!(decode_saved(b"TSH1"), None);
        assert_eq!(decode_saved(&bytes[..bytes.len() - 1]), None);
    }
}
