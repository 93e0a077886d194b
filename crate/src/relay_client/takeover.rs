//! Which resume point a page continues from when the relay says `ready` to a resume: its own
//! (saved in the tab) or the relay's copy of the session (spawn mode).
//!
//! The relay's copy saw every datagram it forwarded; the page's point has what it typed and may
//! not have sent (offline). mosh-server must see the client's input only ever grow: a point that
//! misses input the server already has would make the next state go backwards. So:
//!
//! - the relay saw client states the page's point does not have (another page drove since, or the
//!   tab's save is older than what it sent before a crash): the relay's point;
//! - otherwise the page's own point (it has everything the relay saw, and maybe more), and the
//!   page seeds the relay's copy with it (after a relay restart the copy may be older);
//! - no point of its own (another browser or device): the relay's point;
//! - no point anywhere but the server has had a client before (bridge mode, storage cleared):
//!   this page cannot continue it. Spawn mode says so with a floor above zero; bridge mode with
//!   `resumed` (the relay forwarded to that server since it started), as its floor is above zero for every
//!   server (after a restart the relay cannot know who used one before it).

use crate::relay_proto::control::Ready;
use crate::relay_proto::{CarriedPoint, Mode};
use crate::session::ResumePoint;

/// What a page does on `ready`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Takeover {
    /// A new session (nothing to continue).
    Fresh,
    /// Continue from the page's own point, and send it to the relay as a seed.
    KeepLocal,
    /// Continue from the relay's point.
    Adopt(ResumePoint),
    /// The server has had a client, and nothing here can continue it.
    CannotResume,
}

/// Decides (see the module documentation). `local` is the point the page continues from now, if
/// any; a relay point that does not decode is ignored (the page's own, or nothing).
pub fn takeover(local: Option<&ResumePoint>, ready: &Ready) -> Takeover {
    let relay = ready.point.as_ref().and_then(CarriedPoint::point).cloned();
    match (local, relay) {
        (Some(mine), Some(theirs)) if theirs.input_next > mine.input_next => {
            Takeover::Adopt(theirs)
        }
        (Some(_), _) => Takeover::KeepLocal,
        (None, Some(theirs)) => Takeover::Adopt(theirs),
        (None, None) if had_a_client(ready) => Takeover::CannotResume,
        (None, None) => Takeover::Fresh,
    }
}

/// Whether the server the relay attached to has had a client (see the module documentation).
fn had_a_client(ready: &Ready) -> bool {
    match ready.mode {
        Mode::Spawn => ready.seq_floor > 0,
        Mode::Bridge => ready.resumed,
    }
}

/// One line on what [`takeover`] decided and from what (the page logs it on every `ready`).
pub fn describe_takeover(
    decision: &Takeover,
    local: Option<&ResumePoint>,
    ready: &Ready,
) -> String {
    let relay = ready.point.as_ref().map(|carried| match carried.point() {
        Some(p) => format!("input {} (acked {})", p.input_next.0, p.input_acked.0),
        None => "a point that does not decode".to_string(),
    });
    let mine = local.map(|p| format!("input {} (acked {})", p.input_next.0, p.input_acked.0));
    let what = match decision {
        Takeover::Fresh => "a new session",
        Takeover::KeepLocal => "the page's own point",
        Takeover::Adopt(_) => "the relay's point",
        Takeover::CannotResume => "nothing (cannot resume)",
    };
    format!(
        "tern: ready (resumed: {}, seq floor {}): continuing from {what}; page: {}, relay: {}",
        ready.resumed,
        ready.seq_floor,
        mine.as_deref().unwrap_or("none"),
        relay.as_deref().unwrap_or("none"),
    )
}

/// A point as `seed` carries it (its `Display` is the text a tab's storage keeps).
pub fn encode_point(point: &ResumePoint) -> CarriedPoint {
    CarriedPoint::from(point.clone())
}

/// A point from its text form ([`CarriedPoint`]'s); `None` for text that is not one.
pub fn decode_point(text: &str) -> Option<ResumePoint> {
    CarriedPoint::from_text(text).into_point()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::StateNum;

    fn point(input_next: u64, server_num: u64) -> ResumePoint {
        ResumePoint {
            server_num: StateNum(server_num),
            screen_cols: 80,
            screen_rows: 24,
            screen: Vec::new(),
            input_acked: StateNum(input_next - 1),
            input_next: StateNum(input_next),
            input_pending: Vec::new(),
            next_seq: 10,
            next_fragment_id: 5,
        }
    }

    fn ready(point: Option<&ResumePoint>, seq_floor: u64) -> Ready {
        Ready {
            session: "s".into(),
            mode: Mode::Spawn,
            port: 1,
            key: None,
            max_datagram_size: 1200,
            framing: 1,
            resumed: true,
            seq_floor,
            point: point.map(encode_point),
            view: false,
            owner: None,
            off: None,
            info: None,
        }
    }

    #[test]
    fn the_newer_input_wins_and_a_page_with_nothing_takes_the_relays() {
        let mine = point(40, 100);
        // Another page drove since: its states are numbered far above ours.
        let other = point(40 + crate::session::RESUME_STATE_GAP, 90);
        assert_eq!(takeover(Some(&mine), &ready(Some(&other), 7)), Takeover::Adopt(other.clone()));
        // The relay saw what we saw (or less: keys we typed offline): ours.
        assert_eq!(takeover(Some(&mine), &ready(Some(&point(40, 120)), 7)), Takeover::KeepLocal);
        assert_eq!(takeover(Some(&mine), &ready(Some(&point(35, 90)), 7)), Takeover::KeepLocal);
        assert_eq!(takeover(Some(&mine), &ready(None, 7)), Takeover::KeepLocal);
        assert_eq!(takeover(None, &ready(Some(&other), 7)), Takeover::Adopt(other));
    }

    #[test]
    fn nothing_anywhere_is_fresh_only_for_a_server_nobody_used() {
        assert_eq!(takeover(None, &ready(None, 0)), Takeover::Fresh);
        assert_eq!(takeover(None, &ready(None, 12)), Takeover::CannotResume);
        // A point that does not decode is no point.
        let mut garbled = ready(None, 0);
        garbled.point = Some(CarriedPoint::from("not base64!"));
        assert_eq!(takeover(None, &garbled), Takeover::Fresh);
        // Bridge mode: every floor is above zero (a relay cannot know who used a server before
        // it started); `resumed` says whether the relay forwarded to it before.
        let bridge = |resumed| Ready { mode: Mode::Bridge, resumed, ..ready(None, 1 << 40) };
        assert_eq!(takeover(None, &bridge(false)), Takeover::Fresh);
        assert_eq!(takeover(None, &bridge(true)), Takeover::CannotResume);
    }

    #[test]
    fn the_log_line_names_the_winner_and_both_points() {
        let mine = point(40, 100);
        let line =
            describe_takeover(&Takeover::KeepLocal, Some(&mine), &ready(Some(&point(35, 90)), 7));
        assert!(line.contains("the page's own point"), "{line}");
        assert!(line.contains("page: input 40 (acked 39)"), "{line}");
        assert!(line.contains("relay: input 35 (acked 34)"), "{line}");
        assert!(line.contains("seq floor 7"), "{line}");
        let mut garbled = ready(None, 0);
        garbled.point = Some(CarriedPoint::from("not base64!"));
        let line = describe_takeover(&Takeover::Fresh, None, &garbled);
        assert!(line.contains("page: none, relay: a point that does not decode"), "{line}");
    }
}
