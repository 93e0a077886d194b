//! Keystroke echo latency (issue row 1): single printable keys typed at the shell prompt, one at a
//! time, each drawn by the shell's line editor, timed from the key to its echo.
//!
//! Both clients are timed at the protocol level by the same tap on the link emulator, decrypted
//! with the session key (see [`crate::decode`]):
//!
//! ```text
//!  key ──key-to-wire──> up datagram carrying it reaches the link (client side)
//!      ──network up───> handed to mosh-server (server side)
//!      ──server turn──> first server datagram whose HostBytes draw the key leaves mosh-server
//!      ──network down─> handed to the client  = protocol-level key-to-echo
//! ```
//!
//! The key's time is, for Tern, just before `handle_input` (in-process); for mosh-client, just
//! before the `send-keys` command is written to a tmux control-mode client (so it includes tmux
//! writing the key to mosh-client's terminal, well under a millisecond; the command's round trip is
//! reported as a detail). Tern is also timed in-process, key to the screen model showing the key
//! ("key-to-screen"): the protocol-level time plus Tern's own receive and apply.
//!
//! Keys come at a typist's pace, a random 150-400 ms apart whatever the RTT, so at high RTT several
//! are in flight at once and each meets the client's send timers at a random phase, as a user's
//! keys do (spacing keys wider than an echo would hide mosh-client's frame-interval hold, which is
//! what users feel at 500 ms). Each key is a distinct letter, so its datagram and its echo are
//! told apart from its neighbours'. The first keys of a session only warm up the RTT estimates of
//! both ends and are not counted.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tern_tests::linkemu::Dir;

use crate::decode::{WireEvent, decode};
use crate::link::{Link, PROMPT, close_tern, connect_mosh, connect_tern, rows};
use crate::stats::ms;

/// Distinct keys, so each echo can be told apart; the prompt line stays within 80 columns.
const KEYS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// How a client's keys are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoClient {
    Tern,
    MoshClient,
}

impl EchoClient {
    pub fn label(self) -> &'static str {
        match self {
            EchoClient::Tern => "tern-probe",
            EchoClient::MoshClient => "mosh-client",
        }
    }
}

/// One key's timing, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeySample {
    pub key_to_wire: f64,
    pub network_up: f64,
    pub server_turn: f64,
    pub network_down: f64,
    /// Key to the echo datagram handed to the client (the sum of the four above).
    pub key_to_echo: f64,
    /// Tern only: key to the screen model showing it.
    pub key_to_screen: Option<f64>,
}

/// The samples of one client at one RTT.
#[derive(Debug, Clone, Default)]
pub struct EchoRun {
    pub samples: Vec<KeySample>,
    /// Keys typed and counted whose echo could not be found.
    pub missing: usize,
    /// mosh-client only: round trips of the tmux `send-keys` commands, ms.
    pub tmux_command: Vec<f64>,
}

/// A key as typed: its byte and when.
#[derive(Debug, Clone, Copy)]
struct Typed {
    byte: u8,
    at: Instant,
    screen: Option<Instant>,
}

/// The pauses before each of `n` keys: a typist's pace, 150-400 ms, the same for every client
/// given the same seed (the browser's run gets them too: mosh-server's frame pacing makes the
/// echo depend on when keys come, so clients compared side by side type at the same moments).
pub fn typing_gaps(seed: u64, n: usize) -> Vec<Duration> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| Duration::from_millis(rng.random_range(150..400))).collect()
}

/// Measures `keys` keystrokes (after `warmup` uncounted ones) of one client at one RTT.
pub fn run(
    client: EchoClient,
    rtt: Duration,
    warmup: usize,
    keys: usize,
    seed: u64,
) -> anyhow::Result<EchoRun> {
    if warmup + keys > KEYS.len() {
        bail!("at most {} keys per session", KEYS.len());
    }
    let link = Link::start(rtt / 2, seed)?;
    let gaps = typing_gaps(seed, warmup + keys);
    // After the last key, time for its echo.
    let tail = rtt * 2 + Duration::from_secs(1);
    let mut run = EchoRun::default();
    let typed = match client {
        EchoClient::Tern => type_tern(&link, &gaps, tail)?,
        EchoClient::MoshClient => type_mosh(&link, &gaps, tail, &mut run.tmux_command)?,
    };
    let events = decode(&link.server.key, &link.tap.take());
    for t in &typed[warmup..] {
        match time_key(&events, t) {
            Some(sample) => run.samples.push(sample),
            None => run.missing += 1,
        }
    }
    Ok(run)
}

fn type_tern(link: &Link, gaps: &[Duration], tail: Duration) -> anyhow::Result<Vec<Typed>> {
    let mut client = connect_tern(link, false)?;
    // The prompt line once key i is drawn (later keys may be drawn in the same frame).
    let lines: Vec<String> = (1..=gaps.len())
        .map(|n| format!("{PROMPT}{}", String::from_utf8_lossy(&KEYS[..n])))
        .collect();
    let mut typed: Vec<Typed> = Vec::new();
    let mut last_state = None;
    for (i, (&byte, &gap)) in KEYS.iter().zip(gaps).enumerate() {
        let at = Instant::now();
        client.type_bytes(&[byte]).context("udp")?;
        typed.push(Typed { byte, at, screen: None });
        let until = if i + 1 == gaps.len() { tail } else { gap };
        // Keep the session running until the next key is due, noting when each echo is drawn.
        client
            .run_until(until.saturating_sub(at.elapsed()), |s| {
                if last_state == Some(s.server_state_num()) {
                    return false;
                }
                last_state = Some(s.server_state_num());
                let now = Instant::now();
                let screen = rows(s);
                for (key, line) in typed.iter_mut().zip(&lines) {
                    if key.screen.is_none() && screen.iter().any(|r| r.starts_with(line.as_str())) {
                        key.screen = Some(now);
                    }
                }
                false
            })
            .context("udp")?;
    }
    close_tern(client);
    Ok(typed)
}

fn type_mosh(
    link: &Link,
    gaps: &[Duration],
    tail: Duration,
    tmux: &mut Vec<f64>,
) -> anyhow::Result<Vec<Typed>> {
    let client = connect_mosh(link)?;
    let mut control = client.control().context("tmux control mode")?;
    let mut typed = Vec::new();
    for (&byte, &gap) in KEYS.iter().zip(gaps) {
        let (at, done) = control.send_keys(&[byte]).context("tmux send-keys")?;
        tmux.push(ms(done - at));
        typed.push(Typed { byte, at, screen: None });
        std::thread::sleep(gap.saturating_sub(at.elapsed()));
    }
    std::thread::sleep(tail);
    drop(control);
    drop(client);
    Ok(typed)
}

/// Finds a key's datagram and its echo on the tap and splits the time between them.
fn time_key(events: &[WireEvent], key: &Typed) -> Option<KeySample> {
    let up =
        events.iter().find(|e| e.dir == Dir::Up && e.arrived >= key.at && e.has_key(key.byte))?;
    let up_released = up.released?;
    let echo = events.iter().find(|e| {
        e.dir == Dir::Down
            && e.arrived >= up_released
            && e.drawn_text().contains(char::from(key.byte))
    })?;
    let echo_released = echo.released?;
    Some(KeySample {
        key_to_wire: ms(up.arrived - key.at),
        network_up: ms(up_released - up.arrived),
        server_turn: ms(echo.arrived - up_released),
        network_down: ms(echo_released - echo.arrived),
        key_to_echo: ms(echo_released - key.at),
        key_to_screen: key.screen.map(|s| ms(s - key.at)),
    })
}
