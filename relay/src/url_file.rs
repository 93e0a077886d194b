//! Where the page's URL goes when no person is watching stdout: the URL carries the access token
//! (`#token=`), and stdout under a service manager is a journal other tools and users may read,
//! kept for months, while the token of a `--token-file` never changes. So `main` prints the URL
//! only to a terminal (or when asked with `--print-url`), and otherwise writes it to a file only
//! the relay's user can read (`url` in the state directory, mode 0600) and says where it is.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file's name in the state directory.
pub const FILE_NAME: &str = "url";

/// Writes `url` (and a newline) to `dir/url`, mode 0600, replacing what was there at once (a new
/// file renamed over it, so a looser mode of an older file does not carry over and a reader
/// never sees half a URL). Returns the file's path.
pub fn write(dir: &Path, url: &str) -> io::Result<PathBuf> {
    // Bridge mode may not have made its state directory yet: made as the relay makes it, 0700.
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(format!("{url}\n").as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_file_holds_the_url_and_only_its_owner_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(FILE_NAME);
        fs::write(&old, "stale").unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o644)).unwrap();
        let path = write(dir.path(), "http://127.0.0.1:7480/#token=t").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "http://127.0.0.1:7480/#token=t\n");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        let fresh = dir.path().join("new/state");
        write(&fresh, "u").unwrap();
        assert_eq!(fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o700);
    }
}
