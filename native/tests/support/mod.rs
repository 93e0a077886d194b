//! What the native interop tests share.
// Each test file uses what it needs of this.
#![allow(dead_code)]

use std::time::Duration;

use tern::terminal::{Complete, screen_text};
use tern_native::{MoshServer, MoshServerOptions, NativeClient};

/// How long a test waits for the screen to show what it expects.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The client's server screen as text, rows joined by newlines.
pub fn text(client: &NativeClient<Complete>) -> String {
    screen_text(client.session().server_state().framebuffer()).rows.join("\n")
}

/// Runs the client until its screen holds `needle` (or [`TIMEOUT`]); whether it did.
pub fn wait_for(client: &mut NativeClient<Complete>, needle: &str) -> bool {
    client
        .run_until(TIMEOUT, |s| {
            screen_text(s.server_state().framebuffer()).rows.join("\n").contains(needle)
        })
        .expect("udp")
}

/// A fresh mosh-server running `/bin/sh` with the prompt `$ `, ended when the test drops it (a
/// mosh-server a client spoke to never ends by itself). Panics, loudly, when mosh-server is not
/// installed: `npm test` installs it, and a test that needs a real peer never skips.
pub fn start_sh_server() -> ShServer {
    let options = MoshServerOptions {
        command: vec!["/bin/sh".into()],
        env: vec![("PS1".into(), "$ ".into()), ("ENV".into(), String::new())],
        ..MoshServerOptions::default()
    };
    ShServer(
        MoshServer::start(&options)
            .unwrap_or_else(|e| panic!("mosh-server is required for this test: {e}")),
    )
}

/// A test's mosh-server: ended (SIGTERM to the daemon, which hangs up its shell) when dropped.
pub struct ShServer(pub MoshServer);

impl std::ops::Deref for ShServer {
    type Target = MoshServer;
    fn deref(&self) -> &MoshServer {
        &self.0
    }
}

impl Drop for ShServer {
    fn drop(&mut self) {
        if let Some(pid) = self.0.pid {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
        }
    }
}
