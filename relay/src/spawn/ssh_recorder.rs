//! Whether a session on an `--ssh-host` host has the recorder (`tern-relay record`: its
//! history, pictures and OSC signals), and if not, why, in words the page shows.
//!
//! The recorder is this very executable, so it can only run on a host of the relay's own
//! operating system and architecture; the host says which it is (`uname -s -m`). Until the
//! recorder is copied to hosts and followed from the relay (docs/RELAY.md, "What does not work
//! on a host"), a host that matches lacks it too, and is told so plainly.

use tern::relay_proto::FeaturesOff;

/// What a session without the recorder lacks, as the page names it.
pub const RECORDER_FEATURES: [&str; 3] = ["history", "pictures", "signals"];

/// The command whose output [`recorder_off`] reads: the host's kernel name and machine.
pub const UNAME: &str = "uname -s -m";

/// Why the recorder cannot run on a host that answered `uname -s -m` with `uname` (`Err`: the
/// host could not be asked, with why), for the relay built for `os`/`arch`
/// (`std::env::consts`).
pub fn recorder_off(uname: Result<&str, &str>, os: &str, arch: &str) -> String {
    let out = match uname {
        Ok(out) => out,
        Err(why) => return format!("the relay could not ask it what machine it is ({why})"),
    };
    // The host's words end up in the page's text: only short plain names are taken.
    let plain = |w: &&str| {
        w.len() <= 32 && w.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    let mut words = out.split_whitespace();
    let (Some(kernel), Some(machine)) = (words.next().filter(plain), words.next().filter(plain))
    else {
        return format!(
            "it did not say what machine it is (`{UNAME}` printed no kernel and machine)"
        );
    };
    let (kernel, machine) = (kernel.to_ascii_lowercase(), normal_arch(machine));
    if kernel != os || machine != arch {
        return format!("its machine is {kernel} {machine}, this relay is {os} {arch}");
    }
    "the recorder (tern-relay record) does not run on ssh hosts yet".to_owned()
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

    #[test]
    fn a_host_of_another_machine_is_named_and_a_matching_one_still_says_why() {
        let other = recorder_off(Ok("Linux aarch64\n"), "linux", "x86_64");
        assert_eq!(other, "its machine is linux aarch64, this relay is linux x86_64");
        let mac = recorder_off(Ok("Darwin arm64\n"), "linux", "aarch64");
        assert_eq!(mac, "its machine is darwin aarch64, this relay is linux aarch64");
        let same = recorder_off(Ok("Linux x86_64\n"), "linux", "x86_64");
        assert!(same.contains("does not run on ssh hosts yet"), "{same}");
        assert!(recorder_off(Ok(""), "linux", "x86_64").contains("did not say"));
        let odd = recorder_off(Ok("Linux \u{202e}x86_64\n"), "linux", "x86_64");
        assert!(odd.contains("did not say") && !odd.contains('\u{202e}'), "{odd}");
        let down = recorder_off(Err("timed out"), "linux", "x86_64");
        assert!(down.contains("timed out"), "{down}");
        let off = features_off("devbox", &other);
        assert_eq!(
            off.sentence(),
            "History, pictures and signals are off on devbox: its machine is linux aarch64, \
             this relay is linux x86_64."
        );
    }
}
