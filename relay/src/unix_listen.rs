//! `--listen unix:PATH`: the relay's HTTP side (the page, the API, the WebSocket fallback) on a
//! Unix socket, for the `ssh -L 7480:PATH host` tunnel layout. A TCP port on loopback can be taken
//! by any local user while the relay is down (a restart, a crash, before the service starts) and
//! the page's reconnects then go to them; a socket in a directory only the relay's user can enter
//! cannot be reached, let alone replaced, by anyone else. WebTransport (UDP) does not pass an ssh
//! tunnel and is off in this mode: the page uses the WebSocket fallback.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the socket could not be made.
#[derive(Debug, thiserror::Error)]
#[error("--listen unix:{}: {reason}", .path.display())]
pub struct UnixListenError {
    pub path: PathBuf,
    pub reason: String,
}

/// Binds the socket at `path`: its directory is made 0700 when missing and refused when another
/// user owns it or group or others may enter it; a socket left by an earlier relay that no longer
/// answers is replaced, a live one or any other file is refused. The socket is 0600.
pub fn bind(path: &Path) -> Result<tokio::net::UnixListener, UnixListenError> {
    let fail = |reason: String| UnixListenError { path: path.to_path_buf(), reason };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("/"));
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    }
    let meta = fs::metadata(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(fail(format!(
            "its directory {} must be this user's and mode 0700 (it is {:o}, owner {}): another \
             user could reach or replace the socket; `chmod 700 {}` or pick a directory such as \
             $XDG_RUNTIME_DIR",
            dir.display(),
            meta.mode() & 0o7777,
            meta.uid(),
            dir.display()
        )));
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(fail("in use: another tern-relay answers there".into()));
            }
            fs::remove_file(path)
                .map_err(|e| fail(format!("cannot remove the old socket: {e}")))?;
        }
        Ok(_) => return Err(fail("exists and is not a socket".into())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e.to_string())),
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(|e| fail(e.to_string()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| fail(format!("cannot make it 0600: {e}")))?;
    listener.set_nonblocking(true).map_err(|e| fail(e.to_string()))?;
    tokio::net::UnixListener::from_std(listener).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_socket_is_private_and_an_open_directory_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let path = base.path().join("run/tern.sock");
        let l = bind(&path).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&base.path().join("run")), 0o700, "made 0700");
        assert_eq!(mode(&path), 0o600);
        assert!(bind(&path).unwrap_err().reason.contains("in use"), "a live socket is kept");
        drop(l);
        bind(&path).expect("a stale socket is replaced");
        let open = base.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        let e = bind(&open.join("tern.sock")).unwrap_err();
        assert!(e.reason.contains("mode 0700"), "{e}");
    }
}
