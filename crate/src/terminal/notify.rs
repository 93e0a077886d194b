//! The notification bar: row 0 replaced by a status line when the server is late or a message is
//! set.
//!
//! mosh-client's `NotificationEngine` (MOSH-PROTOCOL.md 7.5), drawn over the displayed frame and
//! never part of the synchronized state. The wording is mosh's with our own prefix `tern: `; the
//! quit hint (`[To quit: Ctrl-^ .]`) is left out because a browser tab quits by closing.

use std::sync::Arc;
use std::time::Duration;

use super::cell::{Attrs, Cell, Color, Renditions};
use super::framebuffer::{Framebuffer, Row};
use super::width::wcwidth;

/// The server counts as late after this long without a new state (mosh's `server_late`).
pub const SERVER_LATE: Duration = Duration::from_millis(6500);
/// Our input counts as unacknowledged after this long (mosh's `reply_late`).
pub const REPLY_LATE: Duration = Duration::from_millis(10000);

/// What the bar reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Notification<'a> {
    /// Since the newest server state arrived.
    pub since_server_state: Duration,
    /// Since the send time of our newest state the server acknowledged.
    pub since_reply: Duration,
    /// A message to show (mosh-client's `set_notification_string`).
    pub message: Option<&'a str>,
    /// Nothing at all has come from the server yet (`since_server_state` counts from the
    /// session's start): a late bar then says that, not "last contact", since there was none.
    pub never_heard: bool,
}

/// mosh's `human_readable_duration`: "N <unit>" under a minute, then "M:SS", then "H:MM:SS".
fn human_readable(seconds: u64, unit: &str) -> String {
    if seconds < 60 {
        format!("{seconds} {unit}")
    } else if seconds < 3600 {
        format!("{}:{:02}", seconds / 60, seconds % 60)
    } else {
        format!("{}:{:02}:{:02}", seconds / 3600, (seconds / 60) % 60, seconds % 60)
    }
}

impl Notification<'_> {
    /// How long until [`text`](Self::text) changes with nothing else happening: the next whole
    /// second of the count while the bar reports lateness, else when the server or our input
    /// becomes late. A driver redraws the bar then, not on a clock: an idle page that wakes
    /// every second costs the browser a task and often a frame each time.
    pub fn next_change(&self) -> Duration {
        let server_late = self.since_server_state > SERVER_LATE;
        let reply_late = self.since_reply > REPLY_LATE;
        if server_late || reply_late {
            let elapsed =
                if reply_late && !server_late { self.since_reply } else { self.since_server_state };
            return Duration::from_secs(1) - Duration::from_nanos(elapsed.subsec_nanos().into());
        }
        // Just past the threshold: `text` turns late once the time is above it.
        let tick = Duration::from_millis(1);
        (SERVER_LATE - self.since_server_state).min(REPLY_LATE - self.since_reply) + tick
    }

    /// The bar's text, or `None` when there is nothing to show.
    pub fn text(&self) -> Option<String> {
        let server_late = self.since_server_state > SERVER_LATE;
        let reply_late = self.since_reply > REPLY_LATE;
        let late = server_late || reply_late;
        let message = self.message.filter(|m| !m.is_empty());
        // Prefer "last contact" unless only the uplink is silent.
        let (elapsed, what) = if reply_late && !server_late {
            (self.since_reply, "reply")
        } else {
            (self.since_server_state, "contact")
        };
        let secs = elapsed.as_secs();
        if server_late && self.never_heard {
            // A mosh-server that is not running, or whose UDP port does not let the relay in: say
            // so instead of counting from a contact that never was.
            let waited = human_readable(secs, "seconds");
            let head = message.map_or(String::new(), |m| format!("{m} | "));
            return Some(format!(
                "tern: {head}Nothing from the mosh-server in {waited}: is it running, and can UDP reach its port?"
            ));
        }
        match (message, late) {
            (None, false) => None,
            (None, true) => {
                Some(format!("tern: Last {what} {} ago.", human_readable(secs, "seconds")))
            }
            (Some(m), false) => Some(format!("tern: {m}")),
            (Some(m), true) => {
                Some(format!("tern: {m} ({} without {what}.)", human_readable(secs, "s")))
            }
        }
    }
}

/// One message from several sources (the link's state, a paste's progress), joined with ` | `.
pub fn join_messages<'a>(parts: impl IntoIterator<Item = Option<&'a str>>) -> Option<String> {
    let parts: Vec<&str> = parts.into_iter().flatten().filter(|m| !m.is_empty()).collect();
    (!parts.is_empty()).then(|| parts.join(" | "))
}

/// `fb` with the notification bar over row 0 (white on blue, message bold, cursor hidden when on
/// row 0), or an unchanged copy when there is nothing to report. Cheap: only row 0 is new.
pub fn overlay_notification(fb: &Framebuffer, note: &Notification<'_>) -> Framebuffer {
    let mut out = fb.clone();
    let Some(text) = note.text() else { return out };
    if out.cursor_row == 0 {
        out.modes.cursor_visible = false;
    }
    let bar = Renditions { attrs: Attrs::NONE, fg: Color::Palette(7), bg: Color::Palette(4) };
    let bold = Renditions { attrs: Attrs::BOLD, ..bar };
    let width = out.width;
    let mut row = Row::new(width, Color::Default);
    for cell in row.cells_mut() {
        *cell = Cell::new(" ", bar, false);
    }
    // The same grapheme rules as the emulator, kept to one row.
    let cells = row.cells_mut();
    let mut col = 0;
    let mut last: Option<usize> = None;
    for ch in text.chars() {
        if col >= width {
            break;
        }
        match wcwidth(ch) {
            w @ (1 | 2) => {
                let w = w as usize;
                if col + w > width {
                    break;
                }
                cells[col] = Cell::new("", bold, w == 2);
                cells[col].push(ch);
                last = Some(col);
                col += w;
            }
            0 => {
                if let Some(at) = last.filter(|&at| !cells[at].is_full()) {
                    cells[at].push(ch);
                }
            }
            _ => {}
        }
    }
    out.rows[0] = Arc::new(row);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_changes_when_the_server_turns_late_and_then_every_whole_second() {
        let ms = Duration::from_millis;
        let note = |server, reply| Notification {
            since_server_state: ms(server),
            since_reply: ms(reply),
            message: None,
            never_heard: false,
        };
        // Nothing to show: the next change is the server turning late (or our input, sooner).
        let quiet = note(2_000, 500);
        assert_eq!(quiet.text(), None);
        assert_eq!(quiet.next_change(), ms(4_501));
        let at = note(2_000 + 4_501, 500 + 4_501);
        assert!(at.text().is_some(), "late once the time is up");
        assert_eq!(note(2_000, 9_000).next_change(), ms(1_001), "our input turns late first");
        // Late: the count moves at the next whole second, and the text does then.
        let late = note(7_300, 0);
        assert_eq!(late.next_change(), ms(700));
        assert_eq!(late.text(), note(7_999, 0).text());
        assert_ne!(late.text(), note(8_000, 0).text());
    }

    #[test]
    fn a_server_never_heard_from_is_said_so_not_counted_from_a_contact() {
        let s = Duration::from_secs;
        let note = |since, never_heard| {
            Notification {
                since_server_state: s(since),
                since_reply: s(since),
                message: None,
                never_heard,
            }
            .text()
        };
        assert_eq!(note(3, true), None, "not late yet");
        let text = note(9, true).unwrap();
        assert!(text.starts_with("tern: Nothing from the mosh-server in 9 seconds"), "{text}");
        assert_eq!(note(9, false).as_deref(), Some("tern: Last contact 9 seconds ago."));
        let with = Notification { message: Some("Pasting"), ..Notification::default() };
        let with = Notification { since_server_state: s(9), never_heard: true, ..with };
        assert!(
            with.text().unwrap().starts_with("tern: Pasting | Nothing from"),
            "{:?}",
            with.text()
        );
    }

    #[test]
    fn messages_join_in_order_and_empty_ones_vanish() {
        assert_eq!(join_messages([None, None]), None);
        assert_eq!(join_messages([Some("a"), Some("")]).as_deref(), Some("a"));
        assert_eq!(
            join_messages([Some("lost"), Some("Pasting")]).as_deref(),
            Some("lost | Pasting")
        );
    }
}
