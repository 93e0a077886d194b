//! The probe's engine: run a script against a mosh-server and report the final screen.
//!
//! `tern-probe` is this plus argument parsing and printing; tests call it in-process.

use std::net::SocketAddr;
use std::time::Duration;

use super::NativeClient;
use super::script::Action;
use tern::session::{ClientSession, SessionConfig};
use tern::terminal::{Complete, ScreenText, screen_text};
use tern::transport::Counters;
use tern::wire::Key;

/// After the script: wait this long at most for every typed key to be acknowledged, then let the
/// screen settle for [`SETTLE`] so the final frame is the server's answer to all of it.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
const SETTLE: Duration = Duration::from_millis(300);

/// Where and how the probe connects.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    pub server: SocketAddr,
    pub key: Key,
    pub cols: u16,
    pub rows: u16,
    pub stop_and_wait: bool,
    pub seed: u64,
}

/// What the probe saw at the end.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub screen: ScreenText,
    pub title: String,
    pub counters: Counters,
    pub srtt: Duration,
    pub send_interval: Duration,
}

/// Runs `actions` in a fresh session and returns the final screen, or a message saying what failed.
pub fn run_probe(options: &ProbeOptions, actions: &[Action]) -> Result<ProbeResult, String> {
    let mut config = SessionConfig::new(options.key.clone(), options.cols, options.rows);
    config.stop_and_wait = options.stop_and_wait;
    config.seed = options.seed;
    let mut client: NativeClient<Complete> =
        NativeClient::connect(options.server, config).map_err(|e| format!("udp: {e}"))?;
    let io = |e: std::io::Error| format!("udp: {e}");
    for action in actions {
        match action {
            Action::Type(bytes) => client.type_bytes(bytes).map_err(io)?,
            Action::Sleep(duration) => client.run_for(*duration).map_err(io)?,
            Action::Resize { cols, rows } => client.resize(*cols, *rows).map_err(io)?,
            Action::WaitText { text, timeout } => {
                let seen = client.run_until(*timeout, |s| screen_contains(s, text)).map_err(io)?;
                if !seen {
                    return Err(format!(
                        "wait-text {text:?}: not on the screen after {} ms{}; screen:\n{}",
                        timeout.as_millis(),
                        closed_note(&client),
                        screen_text(client.session().server_state().framebuffer()).trimmed()
                    ));
                }
            }
        }
        if let Some(reason) = client.closed() {
            return Err(format!("the session ended during the script: {reason:?}"));
        }
    }
    client
        .run_until(DRAIN_LIMIT, |s| s.unacked_input() == 0 && s.has_heard_server())
        .map_err(io)?;
    client.run_for(SETTLE).map_err(io)?;
    let session = client.session();
    if !session.has_heard_server() {
        return Err(format!(
            "nothing received from the server at {} (wrong key or port?){}",
            options.server,
            session.last_error().map(|e| format!("; last error: {e}")).unwrap_or_default()
        ));
    }
    let framebuffer = session.server_state().framebuffer();
    Ok(ProbeResult {
        screen: screen_text(framebuffer),
        title: framebuffer.title().to_owned(),
        counters: session.counters().clone(),
        srtt: session.srtt(),
        send_interval: session.send_interval(),
    })
}

fn screen_contains(session: &ClientSession<Complete>, text: &str) -> bool {
    screen_text(session.server_state().framebuffer()).rows.iter().any(|row| row.contains(text))
}

fn closed_note(client: &NativeClient<Complete>) -> String {
    if let Some(reason) = client.closed() {
        return format!(" (session ended: {reason:?})");
    }
    if !client.session().has_heard_server() {
        return " (nothing received from the server: wrong key or port?)".into();
    }
    String::new()
}
