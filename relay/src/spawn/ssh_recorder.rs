//! Whether a session on an `--ssh-host` host has the recorder (`tern-relay record`: its
//! history, pictures and OSC signals), and if not, why, in words the page shows.
//!
//! The recorder is this very executable, so it can only run on a host of the relay's own
//! operating system and architecture; the host says which it is (`uname -s -m`). On such a host
//! the relay copies itself there once per build ([`INSTALL_RECORDER`]), starts mosh-server with
//! the recorder as its command, and follows the recorder's files back
//! ([`crate::history::follow`]); anywhere else the session starts without it, and the page is
//! told which features are off and why.

use tern::relay_proto::FeaturesOff;

/// What a session without the recorder lacks, as the page names it.
pub const RECORDER_FEATURES: [&str; 3] = ["history", "pictures", "signals"];

/// The command whose output [`recorder_off`] reads: the host's kernel name and machine.
pub const UNAME: &str = "uname -s -m";

/// Why the recorder cannot run on a host that answered `uname -s -m` with `uname` (`Err`: the
/// host could not be asked, with why), for the relay built for `os`/`arch`
/// (`std::env::consts`); `None` when it can.
pub fn machine_mismatch(uname: Result<&str, &str>, os: &str, arch: &str) -> Option<String> {
    let out = match uname {
        Ok(out) => out,
        Err(why) => return Some(format!("the relay could not ask it what machine it is ({why})")),
    };
    // The host's words end up in the page's text: only short plain names are taken.
    let plain = |w: &&str| {
        w.len() <= 32 && w.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    let mut words = out.split_whitespace();
    let (Some(kernel), Some(machine)) = (words.next().filter(plain), words.next().filter(plain))
    else {
        return Some(format!(
            "it did not say what machine it is (`{UNAME}` printed no kernel and machine)"
        ));
    };
    let (kernel, machine) = (kernel.to_ascii_lowercase(), normal_arch(machine));
    (kernel != os || machine != arch)
        .then(|| format!("its machine is {kernel} {machine}, this relay is {os} {arch}"))
}

/// The host's side of the recorder's copy, run by `sh -c` with the recorder's directory
/// (`--ssh-recorder-dir`; relative: under `$HOME`), the executable's SHA-256 and its name. The
/// executable goes to `DIR/bin/<first 16 hex digits of its hash>/` (one directory per build: two
/// relay versions never overwrite each other's, and a build is copied once), the sessions' files
/// to `DIR/sessions/`. Refuses a directory others may write to (each level Tern made: anyone
/// there could swap the file between its check and its use, or read the history), keeps an
/// executable there whose `sha256sum` is right (and reads nothing), else takes stdin into a
/// `mktemp` file in the same directory, checks its hash, makes it executable and renames it into
/// place (a tampered or half-written one is replaced). `tern` beside it is a link to it (the
/// command `tern show`, by its name). Prints `machine KERNEL MACHINE` (`uname -s -m`) first, then
/// `have PATH` and `sessions DIR`. With a fourth argument `check` it reads nothing and makes
/// nothing but the stamp below: `need` where it would have copied (so a start whose copy is in
/// place costs one ssh command, and the executable is sent only when it must be).
///
/// The hash is not read again on every start (half a second for a debug build): `.verified`
/// beside the copy holds the hash and what `stat` said of the copy when the hash was last found
/// right (size, inode, change and modify times to the nanosecond). While those are unchanged the
/// copy is the one that was checked: any write, `chmod`, replacement or rename changes its change
/// time, which no one can set back. Where `stat -c` does not work the hash is read every time.
/// The stamp guards against accidents, not against the user's own account (which owns the copy
/// and could change the stamp as well): the directories' checks are what keep others out.
/// POSIX sh and coreutils only.
pub const INSTALL_RECORDER: &str = r#"set -e
umask 077
echo "machine $(uname -s -m)"
case $1 in /*) root=$1 ;; *) root=$HOME/$1 ;; esac
base=$root/bin
dir=$base/$(printf %s "$2" | cut -c1-16)
sessions=$root/sessions
# Each level is checked before anything is made inside it; `check` makes nothing.
for d in "$root" "$base" "$dir" "$sessions"; do
  if [ "$4" = check ] && [ ! -d "$d" ]; then echo need; exit 0; fi
  mkdir -p "$d"
  case $(ls -ldL "$d" | cut -c6,9) in
    *w*) echo "the recorder's directory $d is writable by other users: refused (chmod go-w it)" >&2; exit 4 ;;
  esac
done
file=$dir/$3
stamp=$dir/.verified
sum() { sha256sum < "$1" | cut -c1-64; }
seen() { stat -L -c '%s %i %z %y' "$1" 2>/dev/null || echo unknown; }
remember() { [ "$1" = unknown ] || printf '%s %s\n' "$2" "$1" > "$stamp"; }
verified() {
  now=$(seen "$file")
  if [ "$now" != unknown ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$2 $now" ]; then return 0; fi
  [ "$(sum "$file")" = "$2" ] || return 1
  remember "$now" "$2"
}
if [ -f "$file" ] && [ ! -L "$file" ] && [ -x "$file" ] && verified "$@"; then
  :
elif [ "$4" = check ]; then
  echo need
  exit 0
else
  part=$(mktemp "$dir/.tern-relay.XXXXXX")
  trap 'rm -f "$part"' EXIT
  cat > "$part"
  if [ "$(sum "$part")" != "$2" ]; then echo "the recorder arrived damaged" >&2; exit 3; fi
  chmod 700 "$part"
  mv -f "$part" "$file"
  trap - EXIT
  remember "$(seen "$file")" "$2"
fi
[ -L "$dir/tern" ] || ln -s tern-relay "$dir/tern"
echo "have $file"
echo "sessions $sessions"
"#;

/// This relay's executable (`--recorder`, else itself) and its SHA-256 (hex), read once: what is
/// copied to hosts.
pub async fn this_executable(
    configured: Option<std::path::PathBuf>,
) -> Result<&'static (std::path::PathBuf, String), &'static String> {
    static THIS: tokio::sync::OnceCell<Result<(std::path::PathBuf, String), String>> =
        tokio::sync::OnceCell::const_new();
    THIS.get_or_init(|| async move {
        let path = match configured {
            Some(p) => p,
            None => std::env::current_exe().map_err(|e| e.to_string())?,
        };
        tokio::task::spawn_blocking(move || {
            use sha2::Digest;
            let mut file =
                std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut hasher = sha2::Sha256::new();
            std::io::copy(&mut file, &mut hasher)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
            Ok((path, hash))
        })
        .await
        .map_err(|e| e.to_string())?
    })
    .await
    .as_ref()
}

/// `uname -m`'s names for the architectures Rust calls otherwise.
fn normal_arch(machine: &str) -> &str {
    match machine {
        "amd64" => "x86_64",
        "arm64" | "armv8l" => "aarch64",
        "i386" | "i486" | "i586" | "i686" => "x86",
        other => other,
    }
}

/// The `ready`'s `off` for a session on `host` without the recorder.
pub fn features_off(host: &str, why: &str) -> FeaturesOff {
    FeaturesOff {
        host: host.to_owned(),
        features: RECORDER_FEATURES.iter().map(|f| (*f).to_owned()).collect(),
        why: why.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the install script here with `sh` as ssh would on the host: `base`, `bytes` on
    /// stdin; success, stdout, stderr.
    fn install_locally(root: &std::path::Path, bytes: &[u8]) -> (bool, String, String) {
        run_locally(root, bytes, "install")
    }

    /// The script in `mode` (`check` or `install`), `bytes` offered on stdin.
    fn run_locally(root: &std::path::Path, bytes: &[u8], mode: &str) -> (bool, String, String) {
        let hash = crate::spawn::sha256_hex(bytes);
        let args = [root.as_os_str(), hash.as_ref(), "tern-relay".as_ref(), mode.as_ref()];
        crate::spawn::run_host_script(INSTALL_RECORDER, "tern-install", &args, bytes)
    }

    #[test]
    fn the_recorder_is_copied_once_checked_replaced_when_tampered_and_refused_in_a_shared_dir() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("tern");
        let base = root.join("bin");
        let binary = b"#!/bin/sh\necho recorder\n".repeat(100);
        // Asked first: the host's machine, and `need`; nothing made, nothing read.
        let (ok, asked, err) = run_locally(&root, &binary, "check");
        assert!(ok, "{err}");
        assert!(asked.starts_with("machine ") && asked.lines().any(|l| l == "need"), "{asked}");
        assert!(!root.exists(), "a check makes nothing");
        let (ok, out, err) = install_locally(&root, &binary);
        assert!(ok, "{err}");
        let path = out.lines().find_map(|l| l.strip_prefix("have ")).expect("`have PATH`");
        let path = path.to_owned();
        let sessions = out.lines().find_map(|l| l.strip_prefix("sessions ")).expect("sessions");
        assert_eq!(std::path::Path::new(sessions), root.join("sessions"));
        let mode = std::fs::metadata(sessions).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the sessions' files are private");
        assert_eq!(std::fs::read(&path).unwrap(), binary);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "executable by its owner only");
        let parent = std::path::Path::new(&path).parent().unwrap().to_owned();
        assert_eq!(parent.parent().unwrap(), base, "a directory per build");
        let mtime = || std::fs::metadata(&path).unwrap().modified().unwrap();
        let first = mtime();
        // Again: kept, nothing written.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (ok, again, err) = install_locally(&root, &binary);
        assert!(ok && again == out, "{err}");
        let (ok, asked, err) = run_locally(&root, &binary, "check");
        assert!(ok && asked == out, "a check finds the copy in place: {asked} {err}");
        assert_eq!(mtime(), first, "reused, not rewritten");
        // The stamp: the hash and what `stat` saw of the copy when the hash was found right.
        let dir = std::path::Path::new(&path).parent().unwrap().to_owned();
        let stat = |p: &str| {
            let out = std::process::Command::new("stat")
                .args(["-L", "-c", "%s %i %z %y", p])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        let hash = crate::spawn::sha256_hex(&binary);
        let stamp = dir.join(".verified");
        assert_eq!(std::fs::read_to_string(&stamp).unwrap(), format!("{hash} {}", stat(&path)));
        // Changed in place to other bytes of the same size (its modify time set back, as `touch
        // -r` would): the change time moved, so the hash is read again and the copy is not kept.
        let mut same_size = binary.clone();
        same_size[0..9].copy_from_slice(b"#!/bin/ba");
        std::fs::write(&path, &same_size).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(first).unwrap();
        let (ok, asked, err) = run_locally(&root, &binary, "check");
        assert!(ok && asked.lines().any(|l| l == "need"), "a changed copy is found: {asked} {err}");
        // A stamp that matches is believed without reading the copy (what saves the hash on every
        // start): a copy whose stamp was forged to fit is kept. Only the copy's owner can do that.
        std::fs::write(&stamp, format!("{hash} {}", stat(&path))).unwrap();
        let (ok, asked, err) = run_locally(&root, &binary, "check");
        assert!(ok && asked == out, "the stamp is trusted: {asked} {err}");
        // Tampered with: replaced by the right bytes.
        std::fs::write(&path, b"#!/bin/sh\necho evil\n").unwrap();
        let (ok, _, err) = install_locally(&root, &binary);
        assert!(ok, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), binary, "the tampered copy was replaced");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [".verified", "tern", "tern-relay"], "no part file left behind");
        let link = std::fs::read_link(dir.join("tern")).unwrap();
        assert_eq!(link, std::path::Path::new("tern-relay"), "`tern` is the copy by that name");
        // A directory others may write: refused before anything is written.
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let (ok, _, err) = install_locally(&root, &binary);
        assert!(!ok && err.contains("writable by other users"), "{err}");
    }

    #[test]
    fn a_host_of_another_machine_is_named_and_a_matching_one_fits() {
        let off = |uname| machine_mismatch(uname, "linux", "x86_64").unwrap_or_default();
        let other = off(Ok("Linux aarch64\n"));
        assert_eq!(other, "its machine is linux aarch64, this relay is linux x86_64");
        let mac = machine_mismatch(Ok("Darwin arm64\n"), "linux", "aarch64").unwrap();
        assert_eq!(mac, "its machine is darwin aarch64, this relay is linux aarch64");
        assert_eq!(machine_mismatch(Ok("Linux x86_64\n"), "linux", "x86_64"), None);
        assert_eq!(machine_mismatch(Ok("Linux amd64\n"), "linux", "x86_64"), None);
        assert!(off(Ok("")).contains("did not say"));
        let odd = off(Ok("Linux \u{202e}x86_64\n"));
        assert!(odd.contains("did not say") && !odd.contains('\u{202e}'), "{odd}");
        assert!(off(Err("timed out")).contains("timed out"));
        let off = features_off("devbox", &other);
        assert_eq!(
            off.sentence(),
            "History, pictures and signals are off on devbox: its machine is linux aarch64, \
             this relay is linux x86_64."
        );
    }
}
