//! A viewer of a session (a share link, a read-only token): fed from the relay's copy of the
//! session's screen ([`Shadow`](super::Shadow)), never from mosh. mosh-server has one client, the
//! owner's page; a viewer gets terminal bytes the relay renders from one screen of its copy to the
//! next, with the same renderer and scrollback rule the owner's page uses ([`Renderer::in_place`],
//! [`rows_scrolled_off`], [`push_rows`]), so rows that scroll off while watching land in the
//! viewer's scrollback as they do in the owner's. A viewer holds no key and sends nothing the
//! session would take: read-only by construction.
//!
//! What to send when: a full paint first, then at most one update per [`VIEWER_INTERVAL`]
//! while the copy changes (changes in between are coalesced into one diff; a burst of output
//! costs a viewer one update per interval, not one per datagram).

use std::time::Duration;

use crate::terminal::{Framebuffer, Renderer, push_rows, rows_scrolled_off};
use crate::time::Instant;

/// The shortest time between two updates to one viewer (about two frames).
pub const VIEWER_INTERVAL: Duration = Duration::from_millis(25);

/// One update for a viewer's terminal: `data` turns what it shows into the session's screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenUpdate {
    /// The session's screen size; the viewer's terminal must have it (it scales to fit, never
    /// resizes the session).
    pub cols: u16,
    pub rows: u16,
    /// A full paint (the first update, or the size changed): the terminal is reset to `cols` x
    /// `rows` before `data` is written.
    pub full: bool,
    pub data: Vec<u8>,
}

/// One viewer's feed (see the module documentation): what its terminal shows, and when the
/// next update is due.
#[derive(Debug, Default)]
pub struct ViewerFeed {
    /// What the viewer's terminal shows (after rows were pushed into its scrollback, the rows
    /// moved up); `None` before the first paint.
    shown: Option<Framebuffer>,
    /// The session's screen as of the last update (to tell which rows scrolled off since).
    server: Option<Framebuffer>,
    /// The copy changed since the last update (the first paint is always due).
    pending: bool,
    last_sent: Option<Instant>,
    /// Updates sent, bytes in them, rows pushed into the viewer's scrollback.
    pub updates: u64,
    pub bytes: u64,
    pub scrollback_rows: u64,
}

impl ViewerFeed {
    pub fn new() -> Self {
        ViewerFeed { pending: true, ..ViewerFeed::default() }
    }

    /// The copy changed (a server datagram brought a new screen).
    pub fn changed(&mut self) {
        self.pending = true;
    }

    /// There is no screen to show yet (the relay's copy does not follow the session): nothing is
    /// due until the copy changes.
    pub fn wait(&mut self) {
        self.pending = false;
    }

    /// When the next update is due; `None`: nothing to send.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.pending {
            return None;
        }
        Some(self.last_sent.map_or(Instant::ZERO, |t| t + VIEWER_INTERVAL))
    }

    /// The update due at `now` for the session's `screen`, if one is due and the screen differs
    /// from what the viewer shows.
    pub fn poll(&mut self, now: Instant, screen: &Framebuffer) -> Option<ScreenUpdate> {
        if self.deadline().is_none_or(|at| now < at) {
            return None;
        }
        self.pending = false;
        let update = self.render(screen)?;
        self.last_sent = Some(now);
        self.updates += 1;
        self.bytes += update.data.len() as u64;
        Some(update)
    }

    /// The bytes from what the viewer shows to `screen` (`None` when there are none).
    fn render(&mut self, screen: &Framebuffer) -> Option<ScreenUpdate> {
        let size = screen.size();
        let same_size = self.shown.as_ref().is_some_and(|s| s.size() == size);
        let mut data = Vec::new();
        if !same_size {
            self.shown = None;
            self.server = None;
        }
        if let (Some(before), Some(shown)) = (&self.server, &mut self.shown) {
            let gone = rows_scrolled_off(before, screen);
            if gone > 0 {
                data = push_rows(shown, &before.rows()[..gone]);
                self.scrollback_rows += gone as u64;
            }
        }
        data.extend(Renderer::in_place().render(self.shown.as_ref(), screen));
        self.shown = Some(screen.clone());
        self.server = Some(screen.clone());
        if same_size && data.is_empty() {
            return None;
        }
        Some(ScreenUpdate { cols: size.cols, rows: size.rows, full: !same_size, data })
    }
}

/// A viewer's page's copy of what its terminal shows, from the updates in order: where it finds
/// the image markers (docs/IMAGES.md), as the owner's page finds them in the screen it drew.
#[derive(Debug, Clone)]
pub struct ViewerScreen {
    term: crate::terminal::Emulator,
}

impl ViewerScreen {
    /// The screen after `first` (a full paint).
    pub fn new(first: &ScreenUpdate) -> Self {
        let size = crate::terminal::Size { cols: first.cols, rows: first.rows };
        let mut screen = ViewerScreen { term: crate::terminal::Emulator::new(size) };
        screen.term.feed(&first.data);
        screen
    }

    /// The screen after `u` too (a full paint starts it again).
    pub fn apply(&mut self, u: &ScreenUpdate) {
        if u.full {
            *self = ViewerScreen::new(u);
        } else {
            self.term.feed(&u.data);
        }
    }

    pub fn framebuffer(&self) -> &Framebuffer {
        self.term.framebuffer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{Emulator, Size, screen_text};

    fn emulator(text: &[u8]) -> Emulator {
        let mut e = Emulator::new(Size { cols: 20, rows: 4 });
        e.feed(text);
        e
    }

    /// A viewer's terminal: what it shows after every update so far.
    struct Viewer {
        term: Emulator,
        scrolled: Vec<String>,
    }

    impl Viewer {
        fn new() -> Self {
            let mut term = Emulator::new(Size { cols: 1, rows: 1 });
            term.keep_scrolled_off(true);
            Viewer { term, scrolled: Vec::new() }
        }
        fn apply(&mut self, u: &ScreenUpdate) {
            if u.full {
                self.term = Emulator::new(Size { cols: u.cols, rows: u.rows });
                self.term.keep_scrolled_off(true);
            }
            self.term.feed(&u.data);
            for row in self.term.take_scrolled_off() {
                let text: String =
                    row.cells().iter().map(|c| if c.is_empty() { " " } else { c.text() }).collect();
                self.scrolled.push(text.trim_end().to_string());
            }
        }
    }

    #[test]
    fn the_first_update_is_a_full_paint_then_only_changes_coalesced() {
        let mut feed = ViewerFeed::new();
        let mut e = emulator(b"$ ");
        let t0 = Instant::from_millis(1000);
        assert_eq!(feed.deadline(), Some(Instant::ZERO), "the first paint is due at once");
        let first = feed.poll(t0, e.framebuffer()).expect("a first paint");
        assert!(first.full && (first.cols, first.rows) == (20, 4));
        let mut viewer = Viewer::new();
        viewer.apply(&first);
        assert_eq!(screen_text(viewer.term.framebuffer()), screen_text(e.framebuffer()));
        assert_eq!(feed.deadline(), None, "nothing changed: nothing due");

        // Two changes within the interval: one update, after it.
        e.feed(b"l");
        feed.changed();
        e.feed(b"s");
        feed.changed();
        let early = t0 + Duration::from_millis(5);
        assert_eq!(feed.deadline(), Some(t0 + VIEWER_INTERVAL));
        assert_eq!(feed.poll(early, e.framebuffer()), None, "coalesced until the interval");
        let u = feed.poll(t0 + VIEWER_INTERVAL, e.framebuffer()).expect("an update");
        assert!(!u.full);
        assert!(u.data.len() < first.data.len(), "a diff, not a paint");
        viewer.apply(&u);
        assert_eq!(screen_text(viewer.term.framebuffer()), screen_text(e.framebuffer()));
        assert_eq!(feed.updates, 2);

        // A change that leaves the screen as it was sends nothing.
        feed.changed();
        assert_eq!(feed.poll(t0 + Duration::from_secs(1), e.framebuffer()), None);
    }

    #[test]
    fn rows_scrolled_off_while_watching_land_in_the_viewers_scrollback() {
        let mut feed = ViewerFeed::new();
        let mut e = emulator(b"one\r\ntwo\r\nthree\r\n$ ");
        let mut viewer = Viewer::new();
        let mut now = Instant::from_millis(10);
        viewer.apply(&feed.poll(now, e.framebuffer()).unwrap());
        e.feed(b"\r\nfour\r\nfive\r\n$ ");
        feed.changed();
        now = now + VIEWER_INTERVAL;
        viewer.apply(&feed.poll(now, e.framebuffer()).unwrap());
        assert_eq!(screen_text(viewer.term.framebuffer()), screen_text(e.framebuffer()));
        assert_eq!(viewer.scrolled, ["one", "two", "three"], "scrolled off, in order");
        assert_eq!(feed.scrollback_rows, 3);
    }

    #[test]
    fn a_resized_session_is_painted_whole_at_its_new_size() {
        let mut feed = ViewerFeed::new();
        let mut e = emulator(b"hello");
        let mut viewer = Viewer::new();
        viewer.apply(&feed.poll(Instant::ZERO, e.framebuffer()).unwrap());
        e.resize(Size { cols: 30, rows: 6 });
        feed.changed();
        let u = feed.poll(Instant::from_millis(100), e.framebuffer()).unwrap();
        assert!(u.full && (u.cols, u.rows) == (30, 6));
        viewer.apply(&u);
        assert_eq!(screen_text(viewer.term.framebuffer()), screen_text(e.framebuffer()));
    }

    #[test]
    fn image_markers_reach_a_viewers_screen_unless_hidden() {
        use crate::images::marker;
        let mut bytes = b"$ show\r\n".to_vec();
        bytes.extend(marker::marker_bytes(42, crate::terminal::Renditions::DEFAULT, 0, 20));
        bytes.extend(b"\r\n\r\n$ ");
        let e = emulator(&bytes);
        let markers = |fb: &Framebuffer| -> Vec<(usize, u16, u64)> {
            let rows = fb.rows().iter().enumerate();
            rows.flat_map(|(r, row)| {
                marker::find(row.cells()).into_iter().map(move |(c, id)| (r, c, id))
            })
            .collect()
        };
        assert_eq!(markers(e.framebuffer()), [(1, 0, 42)]);
        let mut feed = ViewerFeed::new();
        let first = feed.poll(Instant::ZERO, e.framebuffer()).unwrap();
        let mut screen = ViewerScreen::new(&first);
        assert_eq!(
            markers(screen.framebuffer()),
            [(1, 0, 42)],
            "the marker's colours came through"
        );
        // A later update keeps it; a screen with its markers hidden names none.
        let mut e = e;
        e.feed(b"ls");
        feed.changed();
        screen.apply(&feed.poll(Instant::from_millis(100), e.framebuffer()).unwrap());
        assert_eq!(markers(screen.framebuffer()), [(1, 0, 42)]);
        let mut hidden = e.framebuffer().clone();
        marker::hide(&mut hidden);
        let mut feed = ViewerFeed::new();
        let screen = ViewerScreen::new(&feed.poll(Instant::ZERO, &hidden).unwrap());
        assert!(markers(screen.framebuffer()).is_empty());
        assert_eq!(screen_text(screen.framebuffer()), screen_text(e.framebuffer()));
    }
}
