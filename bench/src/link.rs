//! One measured session's surroundings: a fresh mosh-server (the reference shell of the interop
//! tests), the link emulator in front of it with a tap, and the two clients the suite drives.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tern::session::{ClientSession, SessionConfig};
use tern::terminal::{Complete, screen_text};
use tern_native::{MoshServer, NativeClient};
use tern_tests::linkemu::{DirectionConfig, LinkConfig, LinkEmulator, TapLog};
use tern_tests::mosh_client::{TempDir, TmuxMoshClient, start_reference_server_with};

/// The window every client gets.
pub const COLS: u16 = 80;
pub const ROWS: u16 = 24;
/// `start_reference_server`'s prompt.
pub const PROMPT: &str = "tern$ ";
/// How long a client may take to show the first prompt.
const PROMPT_PATIENCE: Duration = Duration::from_secs(20);

/// A mosh-server behind a tapped link emulator with `delay` each way. Dropping it stops the
/// emulator and kills the server.
#[derive(Debug)]
pub struct Link {
    pub server: MoshServer,
    pub emulator: LinkEmulator,
    pub tap: Arc<TapLog>,
    _home: TempDir,
}

impl Link {
    pub fn start(delay: Duration, seed: u64) -> anyhow::Result<Link> {
        Link::start_with(DirectionConfig { delay, ..DirectionConfig::default() }, seed, &[])
    }

    /// A link with `each_way` in both directions, to a reference server with more environment.
    pub fn start_with(
        each_way: DirectionConfig,
        seed: u64,
        env: &[(String, String)],
    ) -> anyhow::Result<Link> {
        let home = TempDir::new("bench-home");
        let server = start_reference_server_with(&home.0, env);
        let target: SocketAddr = ([127, 0, 0, 1], server.port).into();
        let mut config = LinkConfig::new("127.0.0.1:0".parse().expect("literal"), target);
        config.up = each_way.clone();
        config.down = each_way;
        config.seed = Some(seed);
        let emulator = match LinkEmulator::start(config) {
            Ok(e) => e,
            Err(e) => {
                server.kill();
                return Err(e).context("link emulator");
            }
        };
        let tap = TapLog::new();
        emulator.set_tap(Some(tap.clone()));
        Ok(Link { server, emulator, tap, _home: home })
    }

    /// Where clients connect: the emulator's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.emulator.local_addr()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.server.kill();
    }
}

/// The text rows of a Tern session's current screen.
pub fn rows(session: &ClientSession<Complete>) -> Vec<String> {
    screen_text(session.server_state().framebuffer()).rows
}

/// Connects Tern's native client through `link` and waits for the shell's prompt.
pub fn connect_tern(link: &Link, stop_and_wait: bool) -> anyhow::Result<NativeClient<Complete>> {
    let mut config = SessionConfig::new(link.server.key.clone(), COLS, ROWS);
    config.stop_and_wait = stop_and_wait;
    let mut client = NativeClient::connect(link.addr(), config).context("udp")?;
    let prompt = client
        .run_until(PROMPT_PATIENCE, |s| rows(s).iter().any(|r| r.starts_with(PROMPT.trim_end())))
        .context("udp")?;
    if !prompt {
        bail!("tern: no prompt within {PROMPT_PATIENCE:?}");
    }
    Ok(client)
}

/// Ends Tern's session politely so the server exits (it is killed afterwards anyway).
pub fn close_tern(mut client: NativeClient<Complete>) {
    if client.shutdown().is_ok() {
        let _ = client.run_until(Duration::from_secs(2), |s| s.is_closed());
    }
}

/// Starts the stock mosh-client in tmux through `link` and waits for the prompt.
pub fn connect_mosh(link: &Link) -> anyhow::Result<TmuxMoshClient> {
    connect_mosh_sized(link, COLS, ROWS)
}

/// [`connect_mosh`] in a window of `cols` x `rows`.
pub fn connect_mosh_sized(link: &Link, cols: u16, rows: u16) -> anyhow::Result<TmuxMoshClient> {
    let client =
        TmuxMoshClient::start(link.addr().port(), &link.server.key.to_base64(), cols, rows);
    let deadline = Instant::now() + PROMPT_PATIENCE;
    while !client.capture().rows.iter().any(|r| r.starts_with(PROMPT.trim_end())) {
        if Instant::now() >= deadline {
            bail!("mosh-client: no prompt within {PROMPT_PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(client)
}
