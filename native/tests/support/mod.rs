//! What the native interop tests share.

use tern_native::{MoshServer, MoshServerOptions};

/// A fresh mosh-server running `/bin/sh` with the prompt `$ `. Panics, loudly, when mosh-server is
/// not installed: `npm test` installs it, and a test that needs a real peer never skips.
pub fn start_sh_server() -> MoshServer {
    let options = MoshServerOptions {
        command: vec!["/bin/sh".into()],
        env: vec![("PS1".into(), "$ ".into()), ("ENV".into(), String::new())],
        ..MoshServerOptions::default()
    };
    MoshServer::start(&options)
        .unwrap_or_else(|e| panic!("mosh-server is required for this test: {e}"))
}
