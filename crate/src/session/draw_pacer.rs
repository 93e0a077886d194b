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
//!
//! Sans-IO: the driver reports what happened and does what the returned [`Pace`] says.

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
    pub fn request(&mut self, new_state: bool) -> Pace {
        self.counters.requests += 1;
        self.dirty = true;
        self.new_state |= new_state;
        if !self.visible {
            self.counters.coalesced += 1;
            return Pace::default();
        }
        if self.drew_this_frame {
            self.counters.coalesced += 1;
            return Pace { draw: None, request_frame: self.want_frame() };
        }
        self.counters.immediate += 1;
        self.draw_now()
    }

    /// The browser's animation frame callback ran.
    pub fn on_animation_frame(&mut self) -> Pace {
        self.frame_requested = false;
        if self.dirty && self.visible {
            return self.draw_now();
        }
        // A frame went by without a draw: the next request may draw at once again.
        self.drew_this_frame = false;
        Pace::default()
    }

    /// The page became visible or hidden (`document.visibilityState`).
    pub fn set_visible(&mut self, visible: bool) -> Pace {
        if visible == self.visible {
            return Pace::default();
        }
        self.visible = visible;
        if !visible {
            return Pace::default();
        }
        // Shown again: the display catches up with the newest screen in one draw, now.
        if self.dirty { self.draw_now() } else { Pace::default() }
    }

    /// Draws what is pending, now.
    fn draw_now(&mut self) -> Pace {
        let new_state = std::mem::take(&mut self.new_state);
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

    fn draws(p: &Pace) -> bool {
        p.draw.is_some()
    }

    #[test]
    fn a_request_on_a_quiet_screen_draws_at_once() {
        let mut p = DrawPacer::new();
        let pace = p.request(true);
        assert_eq!(pace, Pace { draw: Some(true), request_frame: true });
        // The frame goes by with nothing new: nothing drawn, no further frame asked for.
        assert_eq!(p.on_animation_frame(), Pace::default());
        // And the next request draws at once again.
        assert_eq!(p.request(false), Pace { draw: Some(false), request_frame: true });
    }

    #[test]
    fn a_burst_between_two_frames_is_one_draw_at_the_frame() {
        let mut p = DrawPacer::new();
        assert!(draws(&p.request(true)));
        assert_eq!(p.on_animation_frame(), Pace::default());
        // A flood: a draw happened in this frame interval, then 20 states arrive before the
        // next frame.
        assert!(draws(&p.request(true)));
        let mut frames_asked = 0;
        for _ in 0..20 {
            let pace = p.request(true);
            assert!(!draws(&pace), "drawn again before the frame");
            frames_asked += u32::from(pace.request_frame);
        }
        assert_eq!(frames_asked, 0, "a frame was already asked for");
        let pace = p.on_animation_frame();
        assert_eq!(pace, Pace { draw: Some(true), request_frame: true });
        assert_eq!(p.counters().draws, 3);
        assert_eq!(p.counters().coalesced, 20);
        // Nothing more came: the next frame draws nothing and asks for no more.
        assert_eq!(p.on_animation_frame(), Pace::default());
    }

    #[test]
    fn during_a_flood_every_frame_draws_once() {
        let mut p = DrawPacer::new();
        let mut draws_total = 0;
        for frame in 0..100 {
            for _ in 0..3 {
                draws_total += u32::from(draws(&p.request(true)));
            }
            let pace = p.on_animation_frame();
            draws_total += u32::from(draws(&pace));
            // The first request drew at once; from then on each frame draws what came.
            assert!(frame == 0 || draws(&pace), "frame {frame} drew nothing");
        }
        assert_eq!(draws_total, 101);
    }

    #[test]
    fn a_hidden_page_draws_nothing_and_catches_up_in_one_draw() {
        let mut p = DrawPacer::new();
        assert_eq!(p.set_visible(false), Pace::default());
        for _ in 0..500 {
            assert_eq!(p.request(true), Pace::default());
            // A browser may still run a frame callback asked for before: it draws nothing.
            assert_eq!(p.on_animation_frame(), Pace::default());
        }
        assert_eq!(p.counters().draws, 0);
        let pace = p.set_visible(true);
        assert_eq!(pace.draw, Some(true));
        assert_eq!(p.counters().draws, 1);
        // Shown again with nothing new: nothing to draw.
        let mut q = DrawPacer::new();
        q.set_visible(false);
        assert_eq!(q.set_visible(true), Pace::default());
    }

    #[test]
    fn the_new_state_flag_covers_every_state_since_the_last_draw() {
        let mut p = DrawPacer::new();
        assert_eq!(p.request(false).draw, Some(false));
        p.request(true);
        p.request(false);
        assert_eq!(p.on_animation_frame().draw, Some(true));
        p.request(false);
        assert_eq!(p.on_animation_frame().draw, Some(false));
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
                        p.on_animation_frame()
                    } else {
                        Pace::default()
                    }
                }
                5 => p.set_visible(i % 2 == 0),
                _ => p.request(i % 3 == 0),
            };
            outstanding += u32::from(pace.request_frame);
            assert!(outstanding <= 1, "step {i}: {outstanding} frame requests outstanding");
        }
    }
}
