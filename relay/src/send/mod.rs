//! From the shell to the browser: `tern send FILE` downloads a file in the session's browser,
//! `tern open URL` opens a page there once the person allows it (spawn mode, sessions on this
//! machine).
//!
//! ```text
//!  shell: tern send F ── Unix socket (state dir, 0600, same uid) ──▶ socket.rs: hash, offer
//!     offers.rs: per session, kept on disk ──▶ the session's bridge: `offer` on each attached
//!     page's control stream ◀── `answer` ── page;  the page opens a stream ──▶ download.rs
//! ```
//!
//! `crate::command` types the socket's lines (the recorder speaks them too), `cli.rs` is the
//! command itself, and [`install`] makes it reachable as `tern` in the session's shell.

pub mod cli;
mod download;
pub mod offers;
pub mod show;
pub(crate) mod socket;

use std::path::{Path, PathBuf};

pub(crate) use download::{SharedLinkMemory, serve_download, serve_image};
pub use offers::Offers;

/// The environment a shell on this machine gets so that `tern` reaches this relay: the socket,
/// the session, and `bin` (holding `tern`) first on the PATH.
pub fn shell_env(state_dir: &Path, session: &str, bin: Option<&Path>) -> Vec<(String, String)> {
    let mut env = vec![
        (
            crate::command::SOCKET_ENV.to_owned(),
            socket::socket_path(state_dir).to_string_lossy().into_owned(),
        ),
        (crate::command::SESSION_ENV.to_owned(), session.to_owned()),
    ];
    if let Some(bin) = bin {
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
        env.push(("PATH".to_owned(), format!("{}:{path}", bin.display())));
    }
    env
}

/// Makes `tern` (a link to this relay's executable) reachable from the sessions' shells:
/// `<state>/bin/tern`, which [`shell_env`] puts first on the PATH, and, because a login shell's
/// profile usually sets PATH afresh (Debian's /etc/profile does), also a link in a directory
/// every such PATH has: `/usr/local/bin` for root, `~/.local/bin` otherwise (Debian's
/// ~/.profile adds it when it exists). An existing `tern` there that is not a link to a
/// tern-relay is left alone. Returns the `bin` directory, or `None` when even that failed.
pub fn install(state_dir: &Path, relay: &Path) -> Option<PathBuf> {
    let bin = state_dir.join("bin");
    let own = std::fs::create_dir_all(&bin).and_then(|()| replace_link(&bin.join("tern"), relay));
    if let Err(e) = &own {
        tracing::warn!("`tern` not installed for the sessions: {}: {e}", bin.display());
    }
    let shared_dir = if rustix::process::geteuid().is_root() {
        Some(PathBuf::from("/usr/local/bin"))
    } else {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/bin"))
    };
    if let Some(dir) = shared_dir {
        let link = dir.join("tern");
        let ours = match std::fs::read_link(&link) {
            Ok(target) => {
                target.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tern-relay"))
            }
            Err(_) => !link.exists(),
        };
        if ours {
            match std::fs::create_dir_all(&dir).and_then(|()| replace_link(&link, relay)) {
                Ok(()) => tracing::debug!(link = %link.display(), "`tern` linked"),
                Err(e) => tracing::info!(link = %link.display(), "`tern` not linked there: {e}"),
            }
        } else {
            tracing::info!(link = %link.display(), "a `tern` that is not tern-relay's is there; left alone");
        }
    }
    own.ok().map(|()| bin)
}

/// Points `link` at `target`, atomically (a new link renamed over the old one).
fn replace_link(link: &Path, target: &Path) -> std::io::Result<()> {
    if std::fs::read_link(link).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let tmp = link.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, link)
}
