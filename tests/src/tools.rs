//! Finding the outside programs that interop tests need, failing loudly when one is missing.

use std::path::PathBuf;

/// The path of `program` on `PATH`, or a panic that names the program and how to install it.
///
/// Tests that need a real peer call this instead of skipping: a missing mosh-server must fail the
/// run (`bash scripts/setup.sh` installs everything), never pass it silently.
pub fn require_program(program: &str) -> PathBuf {
    match find_program(program) {
        Some(path) => path,
        None => panic!(
            "required program `{program}` is not on PATH; run `bash scripts/setup.sh` \
             (as root it installs mosh, chromium, chromium-driver and tmux)"
        ),
    }
}

/// The path of `program` on `PATH`, if any.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_and_not_nonsense() {
        assert!(find_program("sh").is_some());
        assert!(find_program("no-such-program-tern").is_none());
    }

    #[test]
    #[should_panic(expected = "no-such-program-tern")]
    fn require_names_the_missing_program() {
        require_program("no-such-program-tern");
    }
}
