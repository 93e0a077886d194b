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
//!   [`FLOOD_DRAW_INTERVAL`] (4 a second, mosh's own slowest frame rate): text scrolling that
//!   fast cannot be read, and each draw costs the browser several milliseconds of layout and
//!   paint (docs/BENCHMARKS.md, "The cost of a frame"). The wait between two such draws is one
//!   timer ([`Pace::wait`]), not an animation frame callback every frame: each frame asked for
//!   costs the browser a lifecycle update even when nothing is drawn. A typed key ends this for
//!   [`INPUT_GRACE`]: the person is looking, and every echo is drawn at once again. The first
//!   pause in the output ends it too.
//!
//! The pacer also says how long the relay may hold the server's datagrams and send them
//! together ([`DrawPacer::poll_relay_hold`], `ClientMessage::Hold`): a browser's cost is per
//! datagram delivered (docs/BENCHMARKS.md, "The cost of a frame in the browser", has the
//! figures), and while the page is hidden, or draws a flood four times a second, taking every
//! state of a flood one by one buys nothing. While
//! datagrams are held they come in bursts, so the pause that ends a flood is counted with the
//! hold added ([`QUIET_GAP`] plus the hold).
//!
//! Sans-IO: the driver reports what happened (with `now`) and does what the returned [`Pace`]
//! says.

use std::time::Duration;

use crate::time::Instant;
use crate::wire::TimestampEcho;

/// New server states drawn without a pause this long make a flood (a frame at 60 Hz is 17 ms,
/// mosh sends at most every 20 ms; a screen that refreshes twice a second is no flood)...
pub const QUIET_GAP: Duration = Duration::from_millis(150);
/// ...once they have kept coming for this long.
pub const FLOOD_AFTER: Duration = Duration::from_millis(500);
/// During a flood, at most one draw per this interval: mosh's own longest frame interval
/// (SEND_INTERVAL_MAX), the rate a slow link shows a flood at.
pub const FLOOD_DRAW_INTERVAL: Duration = Duration::from_millis(250);
/// After a typed key, every frame is drawn again for this long.
pub const INPUT_GRACE: Duration = Duration::from_secs(2);
/// How long the relay may hold the server's datagrams for a hidden page and send them together
/// (`ClientMessage::Hold`): the page draws nothing, and a browser's cost is per datagram
/// delivered, and every batch wakes it. With the oldest of a batch echoed
/// ([`DrawPacer::held_batch_echo`]) mosh-server paces itself to this: a flood comes 4 states a
/// second, in one batch, and once the page is shown the server's pace is back in ~3.5 s
/// (tests/simulation.rs; 500 ms: ~5 states in two batches a second, back in ~2.6 s). Chromium
/// runs a hidden tab's timers at most once a second anyway.
pub const HIDDEN_RELAY_HOLD: Duration = Duration::from_secs(1);
/// ...and during a long flood: the flood's draw interval, as the page draws no more often. A
/// typed key ends it at once (before the key is sent), as it ends the flood's pace.
pub const FLOOD_RELAY_HOLD: Duration = FLOOD_DRAW_INTERVAL;

/// What the driver does after telling the pacer something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pace {
    /// Draw now. `Some(true)`: what is drawn includes a server state new since the last draw
    /// (the echo meter counts such draws).
    pub draw: Option<bool>,
    /// Ask the browser for an animation frame callback ([`DrawPacer::on_animation_frame`]).
    /// A pending [`wait`](Self::wait) is then cancelled: the frame comes first.
    pub request_frame: bool,
    /// Call [`DrawPacer::on_wait_over`] after this long (one timer; a flood's draw interval has
    /// not passed yet).
    pub wait: Option<Duration>,
}

/// What the driver was told to wait for, so that it is never asked twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    None,
    /// An animation frame callback is pending (the browser was asked and has not called back).
    Frame,
    /// A timer is pending ([`Pace::wait`]).
    Timer,
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
    wake: Wake,
    /// When the current run of new server states without a [`QUIET_GAP`] began, and when the
    /// last of them came (drawn or not: a flood's draws are further apart than the gap).
    busy_since: Option<Instant>,
    last_state: Option<Instant>,
    last_draw: Option<Instant>,
    last_input: Option<Instant>,
    /// The hold last asked of the relay ([`DrawPacer::poll_relay_hold`]).
    relay_hold: Duration,
    /// Whether the relay may be asked to hold datagrams at all.
    relay_hold_allowed: bool,
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
            wake: Wake::None,
            busy_since: None,
            last_state: None,
            last_draw: None,
            last_input: None,
            relay_hold: Duration::ZERO,
            relay_hold_allowed: true,
            counters: PacerCounters::default(),
        }
    }

    pub fn counters(&self) -> &PacerCounters {
        &self.counters
    }

    pub fn is_visible(&self) -> bool {
        self.visible
    }

    /// How long the relay may hold the server's datagrams for this page now:
    /// [`HIDDEN_RELAY_HOLD`] while hidden, [`FLOOD_RELAY_HOLD`] during a long flood nobody types
    /// into, else nothing (each datagram as it comes).
    pub fn wanted_relay_hold(&self, now: Instant) -> Duration {
        if !self.relay_hold_allowed {
            Duration::ZERO
        } else if !self.visible {
            HIDDEN_RELAY_HOLD
        } else if self.flooding(now) {
            FLOOD_RELAY_HOLD
        } else {
            Duration::ZERO
        }
    }

    /// The hold to ask the relay for, when it is not the one asked last (the driver sends it).
    pub fn poll_relay_hold(&mut self, now: Instant) -> Option<Duration> {
        let want = self.wanted_relay_hold(now);
        (want != self.relay_hold).then(|| {
            self.relay_hold = want;
            want
        })
    }

    /// Which timestamp of a held batch the page echoes to mosh-server: the oldest while the page
    /// is hidden, else the newest (mosh's own choice).
    ///
    /// Echoing the newest of a batch hides the hold from mosh-server: its round-trip estimate
    /// stays at the path's, so it keeps sending ~50 states a second that a hidden page takes a
    /// second later, 50 at once, decrypting, inflating and applying each (about half of what a
    /// hidden tab costs, docs/BENCHMARKS.md). Echoing the oldest, with the time the page held it
    /// added as always, is a true sample too: what that datagram took to reach the page, the
    /// hold included. mosh-server then sees a slow path and paces itself to it, as it would on any
    /// (send interval `SRTT/2`, at most 250 ms: ~4 states a second), and every state it sends is
    /// still taken in order. The price comes when the page is shown again: the estimate falls
    /// back by 1/8 a sample, so for a few seconds the server sends less often and keys echo
    /// later (predictions show meanwhile; the cost bench's "shown again" rows measure it).
    /// A visible page keeps the newest: someone may be looking, and typing ends its hold anyway.
    pub fn held_batch_echo(&self) -> TimestampEcho {
        if self.visible { TimestampEcho::Newest } else { TimestampEcho::Oldest }
    }

    /// The hold asked last: a new link to the relay starts with none, so the driver asks again.
    pub fn relay_hold(&self) -> Duration {
        self.relay_hold
    }

    /// Whether the relay may be asked to hold datagrams (default true; the benchmark measures
    /// both in one run).
    pub fn allow_relay_hold(&mut self, allowed: bool) {
        self.relay_hold_allowed = allowed;
    }

    /// The pause in new server states that ends a flood: longer while the relay holds datagrams,
    /// which then come in bursts up to the hold apart.
    fn quiet_gap(&self) -> Duration {
        QUIET_GAP + self.relay_hold
    }

    /// Something should be drawn: a server state (`new_state`), a keystroke's prediction, a
    /// timer's notification bar.
    pub fn request(&mut self, new_state: bool, now: Instant) -> Pace {
        self.counters.requests += 1;
        self.dirty = true;
        self.new_state |= new_state;
        if new_state {
            let continues = self
                .last_state
                .is_some_and(|t| now.saturating_duration_since(t) < self.quiet_gap());
            if !continues {
                self.busy_since = Some(now);
            }
            self.last_state = Some(now);
        }
        if !self.visible {
            self.counters.coalesced += 1;
            return Pace::default();
        }
        if self.flood_holds(now) {
            self.counters.coalesced += 1;
            return self.wait_for_interval(now);
        }
        if self.drew_this_frame {
            self.counters.coalesced += 1;
            return Pace { request_frame: self.want_frame(), ..Pace::default() };
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
        if self.wake == Wake::Frame {
            self.wake = Wake::None;
        }
        self.wake_up(now)
    }

    /// The timer of a [`Pace::wait`] ran out: what is pending is drawn now (xterm.js paints it
    /// at its next animation frame anyway).
    pub fn on_wait_over(&mut self, now: Instant) -> Pace {
        if self.wake == Wake::Timer {
            self.wake = Wake::None;
        }
        self.wake_up(now)
    }

    fn wake_up(&mut self, now: Instant) -> Pace {
        if self.dirty && self.visible {
            if self.flood_holds(now) {
                // Not yet: one timer for the rest of the interval.
                self.counters.flood_skips += 1;
                return self.wait_for_interval(now);
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
        let busy = match (self.busy_since, self.last_state) {
            (Some(since), Some(last)) => {
                now.saturating_duration_since(last) < self.quiet_gap()
                    && now.saturating_duration_since(since) >= FLOOD_AFTER
            }
            _ => false,
        };
        busy && !typed
    }

    /// A draw now would come sooner than a flood's interval allows.
    fn flood_holds(&self, now: Instant) -> bool {
        self.flooding(now) && self.until_flood_draw(now).is_some()
    }

    /// How long until a flood's interval since the last draw has passed (`None`: it has).
    fn until_flood_draw(&self, now: Instant) -> Option<Duration> {
        let since = now.saturating_duration_since(self.last_draw?);
        FLOOD_DRAW_INTERVAL.checked_sub(since).filter(|d| !d.is_zero())
    }

    /// Nothing now: a timer for the rest of the flood's interval, unless a wake-up is pending
    /// (a pending animation frame looks again when it comes).
    fn wait_for_interval(&mut self, now: Instant) -> Pace {
        if self.wake != Wake::None {
            return Pace::default();
        }
        match self.until_flood_draw(now) {
            Some(wait) => {
                self.wake = Wake::Timer;
                Pace { wait: Some(wait), ..Pace::default() }
            }
            // The interval has just passed: the next frame draws.
            None => Pace { request_frame: self.want_frame(), ..Pace::default() },
        }
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
        // Shown again, a flood counts from now: while hidden, states came in bursts held up to a
        // second apart, and whether the output still floods shows only from what comes next.
        self.busy_since = None;
        self.last_state = None;
        // The display catches up with the newest screen in one draw, now.
        if self.dirty { self.draw_now(now) } else { Pace::default() }
    }

    /// Draws what is pending, now.
    fn draw_now(&mut self, now: Instant) -> Pace {
        let new_state = std::mem::take(&mut self.new_state);
        self.last_draw = Some(now);
        self.dirty = false;
        self.drew_this_frame = true;
        self.counters.draws += 1;
        // The frame callback clears `drew_this_frame` (or draws what came meanwhile).
        Pace { draw: Some(new_state), request_frame: self.want_frame(), wait: None }
    }

    /// Whether to ask for a frame callback: only when none is pending. A pending timer is
    /// superseded (the driver cancels it): the frame comes sooner.
    fn want_frame(&mut self) -> bool {
        std::mem::replace(&mut self.wake, Wake::Frame) != Wake::Frame
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
    fn the_relay_holds_datagrams_for_a_hidden_page_until_it_is_shown() {
        let mut p = DrawPacer::new();
        assert_eq!(p.poll_relay_hold(T), None, "nothing to ask of the relay at first");
        p.set_visible(false, T);
        assert_eq!(p.poll_relay_hold(T), Some(HIDDEN_RELAY_HOLD));
        assert_eq!(p.poll_relay_hold(T), None, "asked once");
        assert_eq!(p.relay_hold(), HIDDEN_RELAY_HOLD);
        p.set_visible(true, T);
        assert_eq!(p.poll_relay_hold(T), Some(Duration::ZERO));
        // Turned off (the benchmark's comparison), nothing is held.
        p.allow_relay_hold(false);
        p.set_visible(false, T);
        assert_eq!(p.poll_relay_hold(T), None);
    }

    #[test]
    fn a_hidden_page_echoes_the_oldest_timestamp_of_a_held_batch_and_a_visible_one_the_newest() {
        let mut p = DrawPacer::new();
        assert_eq!(p.held_batch_echo(), TimestampEcho::Newest, "a visible page, flooding or not");
        p.set_visible(false, T);
        assert_eq!(p.held_batch_echo(), TimestampEcho::Oldest);
        p.set_visible(true, T);
        assert_eq!(p.held_batch_echo(), TimestampEcho::Newest);
    }

    #[test]
    fn shown_again_during_a_flood_the_page_draws_and_takes_datagrams_at_once_until_it_floods_again()
    {
        let mut p = DrawPacer::new();
        p.set_visible(false, T);
        assert_eq!(p.poll_relay_hold(T), Some(HIDDEN_RELAY_HOLD));
        // Hidden: bursts a second apart; the gaps do not end the flood.
        for second in 0..3 {
            for _ in 0..40 {
                p.request(true, ms(second * 1000));
            }
        }
        assert!(p.flooding(ms(2500)));
        // Shown, 500 ms after the last burst: a draw at once, and no hold (not a flood yet).
        let pace = p.set_visible(true, ms(2500));
        assert_eq!(pace.draw, Some(true));
        assert!(!p.flooding(ms(2500)));
        assert_eq!(p.poll_relay_hold(ms(2500)), Some(Duration::ZERO));
        // The flood goes on: after FLOOD_AFTER it is held again.
        let mut t = 2500;
        while t <= 2500 + FLOOD_AFTER.as_millis() as u64 {
            p.request(true, ms(t));
            t += 20;
        }
        assert_eq!(p.poll_relay_hold(ms(t)), Some(FLOOD_RELAY_HOLD));
    }

    #[test]
    fn a_long_flood_is_held_at_the_relay_until_a_key_or_its_end() {
        let mut p = DrawPacer::new();
        // States every 20 ms: after FLOOD_AFTER the flood is held at the relay.
        let mut t = 0;
        while t < 600 {
            p.request(true, ms(t));
            t += 20;
        }
        assert_eq!(p.poll_relay_hold(ms(t)), Some(FLOOD_RELAY_HOLD));
        // Held, states come in bursts a hold apart: the gaps do not end the flood.
        for burst in 0..4 {
            t += FLOOD_RELAY_HOLD.as_millis() as u64;
            for _ in 0..12 {
                p.request(true, ms(t));
            }
            assert!(p.flooding(ms(t + 200)), "burst {burst}: a gap of the hold ended the flood");
            assert_eq!(p.poll_relay_hold(ms(t + 200)), None);
        }
        // A key ends the hold at once, before it is sent.
        p.note_input(ms(t + 10));
        assert_eq!(p.poll_relay_hold(ms(t + 10)), Some(Duration::ZERO));
        // The grace passes while the flood goes on (each datagram alone again): held again.
        let mut u = t + 20;
        while u < t + 10 + INPUT_GRACE.as_millis() as u64 + 100 {
            p.request(true, ms(u));
            u += 20;
        }
        assert_eq!(p.poll_relay_hold(ms(u)), Some(FLOOD_RELAY_HOLD));
        // The output stops: a pause of the gap plus the hold ends the flood and the hold.
        let quiet = (QUIET_GAP + FLOOD_RELAY_HOLD).as_millis() as u64;
        assert_eq!(p.poll_relay_hold(ms(u - 20 + quiet - 1)), None, "ended before the pause");
        assert_eq!(p.poll_relay_hold(ms(u - 20 + quiet)), Some(Duration::ZERO));
    }

    #[test]
    fn a_request_on_a_quiet_screen_draws_at_once() {
        let mut p = DrawPacer::new();
        let pace = p.request(true, T);
        assert_eq!(pace, Pace { draw: Some(true), request_frame: true, wait: None });
        // The frame goes by with nothing new: nothing drawn, no further frame asked for.
        assert_eq!(p.on_animation_frame(T), Pace::default());
        // And the next request draws at once again.
        assert_eq!(
            p.request(false, T),
            Pace { draw: Some(false), request_frame: true, wait: None }
        );
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
        assert_eq!(pace, Pace { draw: Some(true), request_frame: true, wait: None });
        assert_eq!(p.counters().draws, 3);
        assert_eq!(p.counters().coalesced, 20);
        // Nothing more came: the next frame draws nothing and asks for no more.
        assert_eq!(p.on_animation_frame(T), Pace::default());
    }

    /// A driver's event loop around a pacer: animation frames every 16 ms when asked for, one
    /// timer for a [`Pace::wait`]; records every draw and every wake-up it was asked for.
    struct Loop {
        pacer: DrawPacer,
        frame_pending: bool,
        timer_at: Option<Instant>,
        draws: Vec<Instant>,
        frames_asked: u32,
        timers_armed: u32,
    }

    impl Loop {
        fn new() -> Self {
            Loop {
                pacer: DrawPacer::new(),
                frame_pending: false,
                timer_at: None,
                draws: Vec::new(),
                frames_asked: 0,
                timers_armed: 0,
            }
        }

        fn follow(&mut self, pace: Pace, now: Instant) {
            if pace.request_frame {
                assert!(!self.frame_pending, "a second frame asked for");
                self.frame_pending = true;
                self.frames_asked += 1;
                self.timer_at = None;
            }
            if let Some(wait) = pace.wait {
                assert!(!self.frame_pending && self.timer_at.is_none(), "two wake-ups at once");
                self.timer_at = Some(now + wait);
                self.timers_armed += 1;
            }
            if pace.draw.is_some() {
                self.draws.push(now);
            }
        }

        fn state(&mut self, now: Instant) {
            let pace = self.pacer.request(true, now);
            self.follow(pace, now);
        }

        /// Runs the timer and the frame callback due by `now` (frames come at multiples of 16 ms).
        fn run_until(&mut self, now: Instant) {
            if let Some(at) = self.timer_at.filter(|at| *at <= now) {
                self.timer_at = None;
                let pace = self.pacer.on_wait_over(at);
                self.follow(pace, at);
            }
            if self.frame_pending && now.as_millis() % 16 == 0 {
                self.frame_pending = false;
                let pace = self.pacer.on_animation_frame(now);
                self.follow(pace, now);
            }
        }
    }

    #[test]
    fn during_a_flood_every_frame_draws_once_then_four_a_second_by_one_timer() {
        let mut l = Loop::new();
        // A state every 20 ms (mosh-server's fastest) for 4 s; time in 1 ms steps.
        for t in 0..4000u64 {
            let now = ms(t);
            if t % 20 == 0 {
                l.state(now);
            }
            l.run_until(now);
            if t == 400 {
                // Before the flood is one, every frame with a new state draws: 20 states, 20 draws.
                assert!(l.draws.len() >= 19, "{} draws in the first 400 ms", l.draws.len());
            }
        }
        let late: Vec<_> = l.draws.iter().filter(|t| t.as_millis() >= 1000).collect();
        // 3 s at one draw per 250 ms.
        assert!((11..=13).contains(&late.len()), "{} draws in the flood's last 3 s", late.len());
        for w in late.windows(2) {
            assert!(w[1].saturating_duration_since(*w[0]) >= FLOOD_DRAW_INTERVAL, "{w:?}");
        }
        assert!(l.pacer.flooding(ms(4000)));
        // Waiting costs one timer and one frame per draw, not a frame callback every 16 ms.
        assert!(l.timers_armed > 0);
        assert!(l.frames_asked < 30 + 2 * 13, "{} frames asked for", l.frames_asked);
    }

    #[test]
    fn a_key_typed_while_the_flood_waits_is_drawn_at_the_next_frame() {
        let mut l = Loop::new();
        for t in 0..2000u64 {
            if t % 20 == 0 {
                l.state(ms(t));
            }
            l.run_until(ms(t));
        }
        assert!(l.pacer.flooding(ms(2000)));
        // Wait for the timer to be armed, then type.
        let mut t = 2000;
        while l.timer_at.is_none() {
            t += 1;
            l.run_until(ms(t));
            if t % 20 == 0 {
                l.state(ms(t));
            }
        }
        let typed = ms(t);
        let drawn_before = l.draws.len();
        l.pacer.note_input(typed);
        l.state(typed);
        // The echo's state is drawn at once or at the next frame, and the wait is cancelled.
        for step in 1..=16 {
            l.run_until(typed + Duration::from_millis(step));
        }
        assert!(l.draws.len() > drawn_before, "the key's echo waited for the flood's interval");
        assert!(l.timer_at.is_none(), "the timer was not superseded");
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
    fn never_two_wake_ups_outstanding() {
        let mut p = DrawPacer::new();
        let (mut frame, mut timer) = (false, false);
        // Time moves 7 ms a step, so floods begin and end; a key now and then.
        for i in 0..3000u64 {
            let now = ms(i * 7);
            let pace = match i % 7 {
                0 | 3 if frame => {
                    frame = false;
                    p.on_animation_frame(now)
                }
                4 if timer => {
                    timer = false;
                    p.on_wait_over(now)
                }
                5 => p.set_visible(i % 11 != 0, now),
                6 if i % 50 == 6 => {
                    p.note_input(now);
                    Pace::default()
                }
                _ => p.request(i % 3 == 0, now),
            };
            if pace.request_frame {
                assert!(!frame, "step {i}: two frame requests outstanding");
                frame = true;
                // The driver cancels a pending timer.
                timer = false;
            }
            if pace.wait.is_some() {
                assert!(!frame && !timer, "step {i}: a timer beside another wake-up");
                timer = true;
            }
        }
    }
}
