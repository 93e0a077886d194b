//! Nonce counters kept in sessionStorage, so a page reload under the same key never reuses one.
//!
//! mosh nonces (datagram sequence numbers) and fragment ids must never repeat under one key
//! (MOSH-PROTOCOL.md 2.3, 3.2). Writing storage per datagram would be wasteful, so the shell
//! reserves blocks: storage holds a bound above every number used so far, raised by
//! [`RESERVE`] before any number beyond it goes out. A reload starts from that bound.

/// Numbers reserved per storage write.
const RESERVE: u64 = 1024;

#[derive(Debug)]
pub struct NonceStore {
    name: String,
    seq_bound: u64,
    fragment_bound: u64,
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}

impl NonceStore {
    /// The counters stored for `key` (the mosh key in its base64 form): the first sequence number
    /// and fragment id a new session under that key may use.
    pub fn load(key: &str) -> (NonceStore, u64, u64) {
        let name = format!("tern.nonce.{key}");
        let stored = storage().and_then(|s| s.get_item(&name).ok().flatten()).and_then(|v| {
            let (a, b) = v.split_once(',')?;
            Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
        });
        // Fragment ids start at 1 (SessionConfig::new's default).
        let (seq, fragment) = stored.unwrap_or((0, 1));
        (NonceStore { name, seq_bound: seq, fragment_bound: fragment }, seq, fragment)
    }

    /// Call before sending datagrams numbered below `next_seq` / `next_fragment`: stores a new
    /// bound when they would pass the stored one.
    pub fn cover(&mut self, next_seq: u64, next_fragment: u64) {
        if next_seq <= self.seq_bound && next_fragment <= self.fragment_bound {
            return;
        }
        self.seq_bound = self.seq_bound.max(next_seq.saturating_add(RESERVE));
        self.fragment_bound = self.fragment_bound.max(next_fragment.saturating_add(RESERVE));
        if let Some(s) = storage() {
            // A full or disabled storage only loses the reload guarantee, not the session.
            let _ = s.set_item(&self.name, &format!("{},{}", self.seq_bound, self.fragment_bound));
        }
    }
}

/// Where this tab keeps the session a reload continues (`sessionStorage`: per tab, kept across
/// reloads, gone with the tab; see `tern::relay_client::SavedSession`).
const SAVED_SESSION: &str = "tern.session";

/// The session this tab saved, if any (and readable).
pub fn load_saved_session() -> Option<tern::relay_client::SavedSession> {
    let text = storage()?.get_item(SAVED_SESSION).ok()??;
    tern::relay_client::SavedSession::decode(&text)
}

/// Keeps `saved` for the next page in this tab. A full or disabled storage only loses the resume.
pub fn save_session(saved: &tern::relay_client::SavedSession) {
    if let Some(s) = storage() {
        let _ = s.set_item(SAVED_SESSION, &saved.encode());
    }
}

/// The session is over (or unusable): a reload starts a new one.
pub fn forget_session() {
    if let Some(s) = storage() {
        let _ = s.remove_item(SAVED_SESSION);
    }
}
