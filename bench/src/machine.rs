//! The machine's description for the report: numbers here are noisy, so say where they came from.

use std::process::Command;

use crate::report::Machine;

pub fn describe(quick: bool) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = field(&cpuinfo, "model name").unwrap_or_else(|| "unknown CPU".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = field(&meminfo, "MemTotal")
        .and_then(|v| v.trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or_else(|| "unknown memory".into(), |kb| format!("{:.0} GiB", kb / 1024.0 / 1024.0));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let mosh = output("mosh-client", &["--version"])
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "mosh-client version unknown".into());
    let commit = output("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.trim().is_empty());
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory,
        kernel,
        load_before: load(),
        load_after: String::new(),
        mosh,
        commit: format!(
            "{}{}",
            commit.trim(),
            if dirty { " (with uncommitted changes)" } else { "" }
        ),
        date: output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default().trim().to_owned(),
        mode: if quick { "quick" } else { "full" }.into(),
        duration_s: 0.0,
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn field(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_owned())
    })
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    out.status.success().then_some(text)
}
