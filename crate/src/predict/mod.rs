//! Predictive local echo: what the screen will show once the server echoes the keys just typed.
//!
//! Clean-room from the team's fact sheet (shared/docs/PREDICTION.md) on mosh-client's behaviour;
//! no mosh code. Sans-IO: time, the server frame, the carrier state and the echo ack come in as
//! arguments.
//!
//! ```text
//!  keys ─▶ input::events ─▶ Predictor::on_keys(carrier, server frame): cell + cursor predictions,
//!                                                                       tagged with an epoch
//!  server frame + echo ack ─▶ Predictor::judge: correct → confirm the epoch; wrong → kill the
//!                                              epoch (tentative) or reset (was shown)
//!  Predictor::overlay(server frame) ─▶ the frame to draw (confirmed predictions, underlined when
//!                                      flagged); the notification bar goes over it afterwards
//! ```
//!
//! Why nothing typed at a password prompt is ever drawn: every control key (Enter) starts a new
//! epoch; an epoch's predictions are drawn only once one of them was confirmed by positive
//! evidence (the server frame shows that very character in that cell, where the cell held
//! something else before); with echo off that never happens, and each prediction, once the
//! server has had time to echo it, is judged wrong and its epoch killed while still tentative.
//!
//! Beyond mosh (PREDICTION.md §11, §13): positive evidence confirms as soon as the server frame
//! shows it, not only after the echo ack 50 ms later (the first characters of a line turn
//! visible a frame sooner); judging and building happen against the server frame only, never the
//! displayed one; only parameterless arrow keys are predicted, and `ESC O C` counts as an arrow
//! only within one input event. Issue 36: a line typed at a prompt where typing was echoed before
//! (the shell's, back after a command) is shown from its first key; the cells an insert moves
//! along are rebuilt from each new server frame (vim's `~` is not pushed along a new line).

mod engine;
mod input;

pub use engine::{PredictCounters, Predictor};
pub use input::{Key, events};

use std::time::Duration;

/// When predictions are drawn (mosh's `--predict`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum PredictMode {
    /// Nothing is predicted.
    Never,
    /// Drawn while the link is slow (send interval above 30 ms) or echoes are late.
    #[default]
    Adaptive,
    /// Confirmed predictions are always drawn.
    Always,
    /// Every prediction is drawn at once, unconfirmed: shows passwords typed at a prompt until the
    /// server's answer corrects them. For people who accept that; never the default.
    Experimental,
}

impl PredictMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PredictMode::Never => "never",
            PredictMode::Adaptive => "adaptive",
            PredictMode::Always => "always",
            PredictMode::Experimental => "experimental",
        }
    }

    pub fn parse(s: &str) -> Option<PredictMode> {
        [PredictMode::Never, PredictMode::Adaptive, PredictMode::Always, PredictMode::Experimental]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// How the predictor behaves.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PredictConfig {
    pub mode: PredictMode,
    /// Typing replaces the cell under the cursor instead of pushing the rest of the line right
    /// (no "rubber-banding" of a right prompt or fish's suggestions).
    pub overwrite: bool,
}

/// A key batch longer than this is a paste: nothing in it is predicted, everything resets.
pub const PASTE_BYTES: usize = 100;
/// Predictions pending this long switch display on (a stalled echo becomes visible)...
pub const GLITCH_PENDING: Duration = Duration::from_millis(250);
/// ...and this long, on and underlined until many quick confirmations.
pub const LONG_GLITCH_PENDING: Duration = Duration::from_millis(5000);
/// While predictions are outstanding, the judge runs at least this often.
pub const JUDGE_INTERVAL: Duration = Duration::from_millis(50);
