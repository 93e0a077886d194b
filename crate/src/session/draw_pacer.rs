//! When a driver draws: at most once per animation frame, never while the page is hidden.
//!
//! The session applies every server state as it arrives (the protocol needs each one); drawing
//! it is another matter. Writing a frame to the display (xterm.js: our display diff, then its
//! parser, then its paint) costs far more than applying a state, and nobody sees more than one
//! frame per screen refresh. So the pacer lets a driver draw:
//!
//! - **at once** when nothing was drawn since the last animation frame: a keystroke's echo or a
//!   prediction on a quiet screen goes out with no added wait. (Drawing only from the animation
//!   frame callback would add a whole frame to every echo: xterm.js parses a write in a later task
//!   and paints at the animation frame after that.)
//! - otherwise **at the next animation frame**, once, with whatever arrived meanwhile: a burst of
//!   server states during a flood becomes one draw of the newest screen.
//! - **nothing while hidden**: a background tab asks for no frames and writes nothing; when it is
//!   shown again, one draw brings the display to the newest screen.
//! - **fewer during a long flood**: once new server states have kept coming for
//!   [`FLOOD_AFTER`] (a build log, `cat` of a big file), the display is drawn at most every
//!   [`FLOOD_DRAW_INTERVAL`] (15 a second): text scrolling that fast cannot be read, and each draw
//!   costs the browser several milliseconds of layout and paint (docs/BENCHMARKS.md, "The cost
//!   of a frame"). A typed key ends this for [`INPUT_GRACE`]: the person is looking, and every
//!   echo is drawn at once again. The first pause in the output ends it too.
//!
//! Sans-IO: the driver reports what happened (with `now`) and does what the returned [`Pace`]
//! says.

use std::time::Duration;

use crate::time::Instant;

/// New server states drawn without a pause this long make a flood (a frame at 60 Hz is 17 ms,
/// mosh sends at most every 20 ms; a screen that refreshes twice a second is no flood)...
pub const QUIET_GAP: Duration = Duration::from_millis(150);
/// ...once they have kept coming for this long.
pub const FLOOD_AFTER: Duration = Duration::from_millis(500);
/// During a flood, at most one draw per this interval.
pub const FLOOD_DRAW_INTERVAL: Duration = Duration::from_millis(66);
/// After a typed key, every frame is drawn again for this long.
pub const INPUT_GRACE: Duration = Duration::from_secs(2);

/// What the driver does after telling the pacer something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pace {
    /// Draw now. `Some(true)`: what is drawn includes a server state new since the last draw
    /// (the echo meter counts such draws).
    pub draw: Option<bool>,
    /// Ask the browser for an animation frame callback ([`DrawPacer::on_animation_frame`]).
    pub request_frame: bool,
}

/// Counters a test or the stats can read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PacerCounters {
    /// Draws asked for (new states, keystrokes, timers).
    pub requests: u64,
    /// Draws done.
    pub draws: u64,
    /// Draws done at once, without waiting for an animation frame.
    pub immediate: u64,
    /// Requests folded into a later draw (the screen had already been drawn this frame, or the
    /// page was hidden).
    pub coalesced: u64,
    /// Animation frames that drew nothing although something was new, because a flood's draw
    /// interval had not passed.
    pub flood_skips: u64,
}

/// Decides when to draw. See the module docs.
#[derive(Debug, Clone)]
pub struct DrawPacer {
    visible: bool,
    /// Something changed since the last draw.
    dirty: bool,
    /// A server state arrived since the last draw.
    new_state: bool,
    /// A draw happened since the last animation frame: the next one waits for the frame.
    drew_this_frame: bool,
    /// An animation frame callback is pending (the browser was asked and has not called back).
    frame_requested: bool,
    /// When the current run of new server states without a [`QUIET_GAP`] began, and when the
    /// last of them was drawn.
    busy_since: Option<Instant>,
    last_state_drawn: Option<Instant>,
    last_draw: Option<Instant>,
    last_input: Option<Instant>,
    counters: PacerCounters,
}

impl Default for DrawPacer {
    fn default() -> Self {
        Self::new()
    }
}

impl DrawPacer {
    /// A pacer for a visible page that has drawn nothing yet.
    pub fn new() -> Self {
        DrawPacer {
            visible: true,
            dirty: false,
            new_state: false,
            drew_this_frame: false,
            frame_requested: false,
            busy_since: None,
            last_state_drawn: None,
            last_draw: None,
            last_input: None,
            counters: PacerCounters::default(),
        }
    }

    pub fn counters(&self) -> &PacerCounters {
        &self.counters
    }

    pub fn is_visible(&self) -> bool {
        self.visible
    }

    /// Something should be drawn: a server state (`new_state`), a keystroke's prediction, a
    /// timer's notification bar.
    pub fn request(&mut self, new_state: bool, now: Instant) -> Pace {
        self.counters.requests += 1;
        self.dirty = true;
        self.new_state |= new_state;
        if !self.visible {
            self.counters.coalesced += 1;
            return Pace::default();
        }
        if self.drew_this_frame || self.flood_holds(now) {
            self.counters.coalesced += 1;
            return Pace { draw: None, request_frame: self.want_frame() };
        }
        self.counters.immediate += 1;
        self.draw_now(now)
    }

    /// A key was typed: its echo and everything after it are drawn at once for [`INPUT_GRACE`].
    pub fn note_input(&mut self, now: Instant) {
        self.last_input = Some(now);
    }

    /// The browser's animation frame callback ran.
    pub fn on_animation_frame(&mut self, now: Instant) -> Pace {
        self.frame_requested = false;
        if self.dirty && self.visible {
            if self.flood_holds(now) {
                // Not yet: look again at the next frame.
                self.counters.flood_skips += 1;
                return Pace { draw: None, request_frame: self.want_frame() };
            }
            return self.draw_now(now);
        }
        // A frame went by without a draw: the next request may draw at once again.
        self.drew_this_frame = false;
        Pace::default()
    }

    /// Whether the output has been flooding for [`FLOOD_AFTER`] (and no key was typed lately).
    pub fn flooding(&self, now: Instant) -> bool {
        let typed = self.last_input.is_some_and(|t| now.saturating_duration_since(t) < INPUT_GRACE);
        let busy = match (self.busy_since, self.last_state_drawn) {
            (Some(since), Some(last)) => {
                now.saturating_duration_since(last) < QUIET_GAP
                    && now.saturating_duration_since(since) >= FLOOD_AFTER
            }
            _ => false,
        };
        busy && !typed
    }

    /// A draw now would come sooner than a flood's interval allows.
    fn flood_holds(&self, now: Instant) -> bool {
        self.flooding(now)
            && self
                .last_draw
                .is_some_and(|t| now.saturating_duration_since(t) < FLOOD_DRAW_INTERVAL)
    }

    /// The page became visible or hidden (`document.visibilityState`).
    pub fn set_visible(&mut self, visible: bool, now: Instant) -> Pace {
        if visible == self.visible {
            return Pace::default();
        }
        self.visible = visible;
        if !visible {
            return Pace::default();
        }
        // Shown again: the display catches up with the newest screen in one draw, now.
        if self.dirty { self.draw_now(now) } else { Pace::default() }
    }

    /// Draws what is pending, now.
    fn draw_now(&mut self, now: Instant) -> Pace {
        let new_state = std::mem::take(&mut self.new_state);
        self.last_draw = Some(now);
        if new_state {
            let continues =
                self.last_state_drawn.is_some_and(|t| now.saturating_duration_since(t) < QUIET_GAP);
            if !continues {
                self.busy_since = Some(now);
            }
            self.last_state_drawn = Some(now);
        }
        self.dirty = false;
        self.drew_this_frame = true;
        self.counters.draws += 1;
        // The frame callback clears `drew_this_frame` (or draws what came meanwhile).
        Pace { draw: Some(new_state), request_frame: self.want_frame() }
    }

    /// Whether to ask for a frame callback: only when none is pending.
    fn want_frame(&mut self) -> bool {
        !std::mem::replace(&mut self.frame_requested, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One instant for the tests where time does not matter (nothing floods in no time).
    const T: Instant = Instant::ZERO;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn draws(p: &Pace) -> bool {
        p.draw.is_some()
    }

    #[test]
    fn a_request_on_a_quiet_screen_draws_at_once() {
        let mut p = DrawPacer::new();
        let pace = p.request(true, T);
        assert_eq!(pace, Pace { draw: Some(true), request_frame: true });
        // The frame goes by with nothing new: nothing drawn, no further frame asked for.
        assert_eq!(p.on_animation_frame(T), Pace::default());
        // And the next request draws at once again.
        assert_eq!(p.request(false, T), Pace { draw: Some(false), request_frame: true });
    }

    #[test]
    fn a_burst_between_two_frames_is_one_draw_at_the_frame() {
        let mut p = DrawPacer::new();
        assert!(draws(&p.request(true, T)));
        assert_eq!(p.on_animation_frame(T), Pace::default());
        // A flood: a draw happened in this frame interval, then 20 states arrive before the
        // next frame.
        assert!(draws(&p.request(true, T)));
        let mut frames_asked = 0;
        for _ in 0..20 {
            let pace = p.request(true, T);
            assert!(!draws(&pace), "drawn again before the frame");
            frames_asked += u32::from(pace.request_frame);
        }
        assert_eq!(frames_asked, 0, "a frame was already asked for");
        let pace = p.on_animation_frame(T);
        assert_eq!(pace, Pace { draw: Some(true), request_frame: true });
        assert_eq!(p.counters().draws, 3);
        assert_eq!(p.counters().coalesced, 20);
        // Nothing more came: the next frame draws nothing and asks for no more.
        assert_eq!(p.on_animation_frame(T), Pace::default());
    }

    #[test]
    fn during_a_flood_every_frame_draws_once_then_fifteen_a_second() {
        let mut p = DrawPacer::new();
        let mut draw_times = Vec::new();
        // Three states per 16 ms frame for 3 s.
        for frame in 0..180u64 {
            let now = ms(frame * 16);
            for _ in 0..3 {
                if draws(&p.request(true, now)) {
                    draw_times.push(now);
                }
            }
            let pace = p.on_animation_frame(now + Duration::from_millis(8));
            if draws(&pace) {
                draw_times.push(now + Duration::from_millis(8));
            }
            if frame > 0 && frame * 16 + 8 < 500 {
                assert!(draws(&pace), "frame {frame} drew nothing before the flood was one");
            }
        }
        let late: Vec<_> = draw_times.iter().filter(|t| t.as_millis() >= 1000).collect();
        // 2 s at one draw per 66 ms or more (a frame's granularity: every 5th frame, 80 ms).
        assert!((20..=31).contains(&late.len()), "{} draws in the flood's last 2 s", late.len());
        for w in late.windows(2) {
            assert!(w[1].saturating_duration_since(*w[0]) >= FLOOD_DRAW_INTERVAL, "{w:?}");
        }
        assert!(p.counters().flood_skips > 0);
        assert!(p.flooding(ms(180 * 16)));
    }

    #[test]
    fn a_typed_key_or_a_pause_ends_the_flood_pace() {
        let mut p = DrawPacer::new();
        let mut now = ms(0);
        for _ in 0..60 {
            p.request(true, now);
            p.on_animation_frame(now);
            now = now + Duration::from_millis(16);
        }
        assert!(p.flooding(now));
        // A key: its echo is drawn at the next frame, not 66 ms later.
        p.note_input(now);
        assert!(!p.flooding(now));
        let at_once = |p: &mut DrawPacer, t: Instant| {
            draws(&p.request(true, t)) || draws(&p.on_animation_frame(t + Duration::from_millis(1)))
        };
        assert!(at_once(&mut p, now));
        assert!(at_once(&mut p, now + Duration::from_millis(17)), "the frame after it too");
        // The grace runs out while the flood goes on: the pace comes back.
        let later = now + INPUT_GRACE + Duration::from_millis(100);
        let mut t = now + Duration::from_millis(32);
        while t < later {
            p.request(true, t);
            p.on_animation_frame(t);
            t = t + Duration::from_millis(16);
        }
        assert!(p.flooding(t));
        // A pause in the output: the next state is drawn at once.
        let after_pause = t + QUIET_GAP + Duration::from_millis(1);
        assert!(!p.flooding(after_pause));
        p.on_animation_frame(after_pause);
        p.on_animation_frame(after_pause + Duration::from_millis(16));
        assert!(draws(&p.request(true, after_pause + Duration::from_millis(20))), "at once");
    }

    #[test]
    fn a_hidden_page_draws_nothing_and_catches_up_in_one_draw() {
        let mut p = DrawPacer::new();
        assert_eq!(p.set_visible(false, T), Pace::default());
        for _ in 0..500 {
            assert_eq!(p.request(true, T), Pace::default());
            // A browser may still run a frame callback asked for before: it draws nothing.
            assert_eq!(p.on_animation_frame(T), Pace::default());
        }
        assert_eq!(p.counters().draws, 0);
        let pace = p.set_visible(true, T);
        assert_eq!(pace.draw, Some(true));
        assert_eq!(p.counters().draws, 1);
        // Shown again with nothing new: nothing to draw.
        let mut q = DrawPacer::new();
        q.set_visible(false, T);
        assert_eq!(q.set_visible(true, T), Pace::default());
    }

    #[test]
    fn the_new_state_flag_covers_every_state_since_the_last_draw() {
        let mut p = DrawPacer::new();
        assert_eq!(p.request(false, T).draw, Some(false));
        p.request(true, T);
        p.request(false, T);
        assert_eq!(p.on_animation_frame(T).draw, Some(true));
        p.request(false, T);
        assert_eq!(p.on_animation_frame(T).draw, Some(false));
    }

    #[test]
    fn never_two_frame_requests_outstanding() {
        let mut p = DrawPacer::new();
        let mut outstanding = 0;
        for i in 0..1000u32 {
            let pace = match i % 7 {
                0 | 3 => {
                    if outstanding > 0 {
                        outstanding -= 1;
                        p.on_animation_frame(T)
                    } else {
                        Pace::default()
                    }
                }
                5 => p.set_visible(i % 2 == 0, T),
                _ => p.request(i % 3 == 0, T),
            };
            outstanding += u32::from(pace.request_frame);
            assert!(outstanding <= 1, "step {i}: {outstanding} frame requests outstanding");
        }
    }
}
