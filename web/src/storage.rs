//! What a page keeps in browser storage: nonce counters (sessionStorage), so a page reload under
//! the same key never reuses one, and the saved session a later page continues (this tab's, and the
//! browser's last).
//!
//! mosh nonces (datagram sequence numbers) and fragment ids must never repeat under one key
//! (MOSH-PROTOCOL.md 2.3, 3.2). The page client (`tern::page::NonceReservation`) decides when
//! to reserve a block above the numbers in use; this file only keeps the bound it hands over.
//!
//! Any page of the relay's origin can read this origin's storage, so nothing here shows a secret:
//! a saved session (the mosh key, the screen) is sealed under a key derived from the token
//! (`tern::relay_client::StorageSeal`), and the nonce counters are filed under a name derived
//! from the token and the session key, not under the key.

use std::cell::RefCell;

use tern::page::NonceBounds;
use tern::relay_client::StorageSeal;

thread_local! {
    /// The token this page holds (one per page), for sealing and naming; set by [`init`].
    static SEAL: RefCell<Option<(String, StorageSeal)>> = const { RefCell::new(None) };
}

/// Keys what this page stores to its token: before anything is loaded or saved.
pub fn init(token: &str) {
    SEAL.with(|s| *s.borrow_mut() = Some((token.to_string(), StorageSeal::new(token))));
}

/// `text` sealed under the token; `None` before [`init`] or without random numbers (then
/// nothing is stored: a resume lost, never a secret shown).
fn seal(text: &str) -> Option<String> {
    let random = crate::js::random::<8>().ok()?;
    SEAL.with(|s| s.borrow().as_ref().map(|(_, seal)| seal.seal(text, random)))
}

/// What [`seal`] sealed; `None` for anything else (another token's, an old unsealed value).
fn open(stored: &str) -> Option<String> {
    SEAL.with(|s| s.borrow().as_ref().and_then(|(_, seal)| seal.open(stored)))
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}

fn nonce_item(key_text: &str) -> Option<String> {
    SEAL.with(|s| {
        let name = tern::relay_proto::proof::storage_name(&s.borrow().as_ref()?.0, key_text);
        Some(format!("tern.nonce.{name}"))
    })
}

/// The nonce bounds kept for the session key `key_text` (its base64 form), if any.
pub fn kept_nonces(key_text: &str) -> Option<NonceBounds> {
    let text = storage()?.get_item(&nonce_item(key_text)?).ok()??;
    let (seq, fragment_id) = text.split_once(',')?;
    Some(NonceBounds { seq: seq.parse().ok()?, fragment_id: fragment_id.parse().ok()? })
}

/// Keeps `bounds` for `key_text` (before any number they cover leaves).
pub fn reserve_nonces(key_text: &str, bounds: NonceBounds) {
    if let (Some(s), Some(item)) = (storage(), nonce_item(key_text)) {
        let _ = s.set_item(&item, &format!("{},{}", bounds.seq, bounds.fragment_id));
    }
}

const SAVED_SESSION: &str = "tern.session";
/// The same, in `localStorage` (this origin, kept when the tab closes or the browser restarts): the
/// session this browser drove last, which a tab opened on the URL again continues.
const LAST_SESSION: &str = "tern.last";

fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

thread_local! {
    /// This page does not continue the browser's last session (another tab drives it).
    static PASS_OVER_LAST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Where a saved session came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavedIn {
    /// This tab's (a reload).
    Tab,
    /// The browser's last session (a tab opened again, the browser restarted).
    Browser,
}

/// The session this tab saved, else the one this browser drove last (and readable).
pub fn load_saved_session() -> Option<(tern::relay_client::SavedSession, SavedIn)> {
    let read = |s: web_sys::Storage, name| {
        let text = open(&s.get_item(name).ok()??)?;
        tern::relay_client::SavedSession::decode(&text)
    };
    if let Some(saved) = storage().and_then(|s| read(s, SAVED_SESSION)) {
        return Some((saved, SavedIn::Tab));
    }
    if PASS_OVER_LAST.with(std::cell::Cell::get) {
        return None;
    }
    local_storage().and_then(|s| read(s, LAST_SESSION)).map(|saved| (saved, SavedIn::Browser))
}

/// Keeps `saved` for the next page in this tab, and as this browser's last session. A full or
/// disabled storage only loses the resume.
pub fn save_session(saved: &tern::relay_client::SavedSession) {
    let Some(text) = seal(&saved.encode()) else { return };
    if let Some(s) = storage() {
        let _ = s.set_item(SAVED_SESSION, &text);
    }
    if let Some(s) = local_storage() {
        let _ = s.set_item(LAST_SESSION, &text);
    }
}

/// The session `id` is over (or unusable here): neither this tab nor the browser continues it.
pub fn forget_session(id: Option<&str>) {
    if let Some(s) = storage() {
        let _ = s.remove_item(SAVED_SESSION);
    }
    let Some(id) = id else { return };
    if let Some(s) = local_storage() {
        // Only if it is still the last one: another tab may have saved its own since.
        let last = s.get_item(LAST_SESSION).ok().flatten();
        if last
            .as_deref()
            .and_then(open)
            .as_deref()
            .and_then(tern::relay_client::SavedSession::decode)
            .is_some_and(|l| l.session_id == id)
        {
            let _ = s.remove_item(LAST_SESSION);
        }
    }
}

/// This page starts afresh although a session is saved (another tab drives it): it forgets the
/// tab's copy and passes over the browser's, which stays for that other tab.
pub fn pass_over_saved_session() {
    if let Some(s) = storage() {
        let _ = s.remove_item(SAVED_SESSION);
    }
    PASS_OVER_LAST.with(|p| p.set(true));
}
