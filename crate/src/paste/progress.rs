//! What a paste looks like to the person: a structured progress value and its one-line text.

use std::time::Duration;

/// Where the paste in front stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PasteState {
    /// The browser is reading and hashing the file.
    Reading,
    /// Asking the relay what it holds of this content.
    Asking,
    /// Bytes are on their way.
    Sending,
    /// The link broke; waiting for it to come back.
    WaitingForRelay,
    /// The link is back; resuming from what the relay holds.
    Resuming,
    /// Finished: the path was typed (shown for a few seconds).
    Done,
    /// Given up (shown for a few seconds with the reason).
    Failed,
    /// Cancelled by the person (shown for a few seconds).
    Cancelled,
}

impl PasteState {
    pub fn as_str(self) -> &'static str {
        match self {
            PasteState::Reading => "reading",
            PasteState::Asking => "asking",
            PasteState::Sending => "sending",
            PasteState::WaitingForRelay => "waiting_for_relay",
            PasteState::Resuming => "resuming",
            PasteState::Done => "done",
            PasteState::Failed => "failed",
            PasteState::Cancelled => "cancelled",
        }
    }

    /// Still under way (Escape cancels it).
    pub fn is_active(self) -> bool {
        !matches!(self, PasteState::Done | PasteState::Failed | PasteState::Cancelled)
    }
}

/// The progress of the paste in front of the queue, for the page and the notification bar.
#[derive(Clone, Debug, PartialEq)]
pub struct PasteProgress {
    pub state: PasteState,
    /// Bytes the relay holds (0 until it said).
    pub bytes_done: u64,
    /// Content size (0 while reading).
    pub total: u64,
    /// Measured delivery rate in bytes per second.
    pub rate: Option<u64>,
    /// Estimated time to finish, once the rate is measured.
    pub time_left: Option<Duration>,
    /// Pastes waiting behind this one.
    pub queued: usize,
    /// Why it failed (state `Failed`).
    pub error: Option<String>,
}

impl PasteProgress {
    /// `bytes_done` of `total` in percent, 0..=100.
    pub fn percent(&self) -> f64 {
        if self.total == 0 { 0.0 } else { self.bytes_done as f64 * 100.0 / self.total as f64 }
    }

    /// What the person reads about the paste (the page's paste box, which has its own cancel
    /// button).
    pub fn text(&self) -> String {
        let more =
            if self.queued > 0 { format!(" (+{} queued)", self.queued) } else { String::new() };
        let busy = |what: &str| format!("Pasting {}: {what}{more}", size(self.total));
        match self.state {
            PasteState::Reading => "Pasting: reading the file…".to_string(),
            PasteState::Asking => busy("asking the relay…"),
            PasteState::WaitingForRelay => busy("interrupted; waiting for the relay…"),
            PasteState::Resuming => busy("interrupted; resuming…"),
            PasteState::Sending => {
                let rate = self.rate.map_or("measuring".to_string(), |r| format!("{}/s", size(r)));
                let left = self.time_left.map_or(String::new(), |t| {
                    format!(", {} left", human_secs(t.as_secs_f64().ceil() as u64))
                });
                let percent = whole_percent(self.bytes_done, self.total);
                format!("Pasting: {percent}% of {}, {rate}{left}{more}", size(self.total))
            }
            PasteState::Done => "Pasted.".to_string(),
            PasteState::Failed => {
                format!("Paste failed: {}", self.error.as_deref().unwrap_or("unknown error"))
            }
            PasteState::Cancelled => "Paste cancelled.".to_string(),
        }
    }

    /// The line in mosh's notification bar (and `stats().paste.line`): the text, and how to
    /// cancel while the paste is under way.
    pub fn line(&self) -> String {
        let text = self.text();
        if self.state.is_active() { format!("{text} [Esc cancels]") } else { text }
    }
}

/// Bytes for humans (decimal units, as network rates are), rounded half up. In integers: the
/// page's wasm then carries no float formatting (about 3 KB of brotli, docs/BENCHMARKS.md).
pub fn size(bytes: u64) -> String {
    if bytes >= 1_000_000 {
        let tenths = bytes.saturating_add(50_000) / 100_000;
        format!("{}.{} MB", tenths / 10, tenths % 10)
    } else if bytes >= 1_000 {
        format!("{} kB", (bytes + 500) / 1_000)
    } else {
        format!("{bytes} B")
    }
}

/// `done` of `total` in whole percent, rounded down (100 once all is done; 0 of nothing).
pub fn whole_percent(done: u64, total: u64) -> u64 {
    if total == 0 { 0 } else { (u128::from(done) * 100 / u128::from(total)) as u64 }
}

fn human_secs(s: u64) -> String {
    if s < 60 { format!("{s} s") } else { format!("{}:{:02}", s / 60, s % 60) }
}

/// A path as typed into a shell: quoted when it holds anything but plain path characters.
pub fn shell_word(path: &str) -> String {
    if !path.is_empty()
        && path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b))
    {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_percents_read_as_people_expect_without_floats() {
        let cases = [
            (0, "0 B"),
            (999, "999 B"),
            (1_000, "1 kB"),
            (1_499, "1 kB"),
            (1_500, "2 kB"),
            (999_499, "999 kB"),
            (999_500, "1000 kB"),
            (1_000_000, "1.0 MB"),
            (1_049_999, "1.0 MB"),
            (1_050_000, "1.1 MB"),
            (13_400_000, "13.4 MB"),
            (u64::MAX, "18446744073709.5 MB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(size(bytes), text, "{bytes}");
        }
        assert_eq!(whole_percent(0, 0), 0);
        assert_eq!(whole_percent(1, 3), 33);
        assert_eq!(whole_percent(2, 3), 66, "rounded down: 100 only once all is done");
        assert_eq!(whole_percent(999, 1000), 99);
        assert_eq!(whole_percent(u64::MAX, u64::MAX), 100);
    }

    fn progress(state: PasteState) -> PasteProgress {
        PasteProgress {
            state,
            bytes_done: 1_500_000,
            total: 3_200_000,
            rate: Some(1_000_000),
            time_left: Some(Duration::from_millis(1700)),
            queued: 1,
            error: None,
        }
    }

    #[test]
    fn lines_read_as_before() {
        assert_eq!(
            progress(PasteState::Sending).line(),
            "Pasting: 46% of 3.2 MB, 1.0 MB/s, 2 s left (+1 queued) [Esc cancels]"
        );
        assert_eq!(
            progress(PasteState::Asking).line(),
            "Pasting 3.2 MB: asking the relay… (+1 queued) [Esc cancels]"
        );
        assert_eq!(progress(PasteState::Cancelled).line(), "Paste cancelled.");
        let failed =
            PasteProgress { error: Some("too big".into()), ..progress(PasteState::Failed) };
        assert_eq!(failed.line(), "Paste failed: too big");
        let slow = PasteProgress {
            rate: None,
            time_left: None,
            queued: 0,
            ..progress(PasteState::Sending)
        };
        assert_eq!(slow.line(), "Pasting: 46% of 3.2 MB, measuring [Esc cancels]");
        let long = PasteProgress {
            time_left: Some(Duration::from_secs(75)),
            ..progress(PasteState::Sending)
        };
        assert!(long.line().contains("1:15 left"), "{}", long.line());
    }

    #[test]
    fn paths_are_quoted_only_when_needed() {
        assert_eq!(
            shell_word("/home/a/.cache/tern/pastes/ab12.png"),
            "/home/a/.cache/tern/pastes/ab12.png"
        );
        assert_eq!(shell_word("/tmp/my pics/a.png"), "'/tmp/my pics/a.png'");
        assert_eq!(shell_word("/tmp/it's.png"), r"'/tmp/it'\''s.png'");
        assert_eq!(shell_word(""), "''");
    }
}
