//! The release as a person gets it: how long from a clean Debian root with mosh to the printed URL
//! through `install.sh` from a local mirror, how big the static binaries and the .debs are, and how
//! long the relay takes from exec to its printed URL.
//!
//! `npm run dist` (scripts/dist.sh) builds `dist/` first, so the numbers are this tree's. The clean
//! root is the Debian 12 root of tests/dist/deb.test.mjs; `tests/dist/install-bench.mjs` does the
//! timing inside it and prints one JSON line, read here.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::report::Report;
use crate::stats::quantile;
use crate::{Options, progress};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/ has a parent").to_path_buf()
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct InstallRun {
    /// Clean root with mosh → the relay's `Open` line, through install.sh (median of the runs).
    pub install_to_url_ms: Option<f64>,
    /// Its parts, medians: install.sh alone, and the relay's start to its URL in the root.
    pub install_script_ms: Option<f64>,
    pub relay_start_in_root_ms: Option<f64>,
    pub install_runs: usize,
    /// Why the install timing is missing, when it is.
    pub install_problem: Option<String>,
    /// (target, bytes) of each stripped static binary, and (arch, bytes) of each .deb.
    pub binaries: Vec<(String, u64)>,
    pub debs: Vec<(String, u64)>,
    pub tarballs: Vec<(String, u64)>,
    /// exec → `Open` line of the static x86_64 binary, with a fresh state directory each time.
    pub cold_start_ms: Vec<f64>,
}

/// Builds dist/ (scripts/dist.sh) and measures.
pub fn run(quick: bool) -> anyhow::Result<InstallRun> {
    let root = root();
    let status = Command::new("bash")
        .arg("scripts/dist.sh")
        .current_dir(&root)
        .stdout(Stdio::null())
        .status()
        .context("running scripts/dist.sh")?;
    if !status.success() {
        bail!("scripts/dist.sh failed ({status})");
    }
    let dist = root.join("dist");
    let mut run = InstallRun::default();
    let scratch = Scratch::new()?;
    for entry in std::fs::read_dir(&dist)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy().to_string();
        let bytes = std::fs::metadata(&path)?.len();
        if let Some(arch) = name.strip_suffix(".deb").and_then(|n| n.rsplit('_').next()) {
            run.debs.push((arch.to_string(), bytes));
        } else if let Some(target) =
            name.strip_prefix("tern-relay-").and_then(|n| n.strip_suffix(".tar.gz"))
        {
            run.tarballs.push((target.to_string(), bytes));
            let out = scratch.path().join(target);
            std::fs::create_dir_all(&out)?;
            let tar = Command::new("tar").arg("-xzf").arg(&path).arg("-C").arg(&out).status()?;
            if !tar.success() {
                bail!("cannot unpack {name}");
            }
            let bin = find_binary(&out).with_context(|| format!("no tern-relay in {name}"))?;
            run.binaries.push((target.to_string(), std::fs::metadata(&bin)?.len()));
        }
    }
    run.debs.sort();
    run.tarballs.sort();
    run.binaries.sort();

    let host = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    let bin = find_binary(&scratch.path().join(&host)).context("no binary for this machine")?;
    let starts = if quick { 5 } else { 21 };
    for i in 0..starts {
        run.cold_start_ms.push(cold_start(&bin, &scratch.path().join(format!("cold-{i}")))?);
    }

    match install_in_clean_root(&root, if quick { 1 } else { 3 }) {
        Ok(json) => {
            let runs = json["runs"].as_array().map(Vec::len).unwrap_or(0);
            let median = |key: &str| {
                let v: Vec<f64> = json["runs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r[key].as_f64())
                    .collect();
                crate::stats::quantile(&v, 0.5)
            };
            run.install_runs = runs;
            run.install_to_url_ms = median("total_ms");
            run.install_script_ms = median("install_ms");
            run.relay_start_in_root_ms = median("relay_start_ms");
        }
        Err(e) => run.install_problem = Some(format!("{e:#}")),
    }
    Ok(run)
}

fn find_binary(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let p = e.path();
        if p.is_dir() { find_binary(&p) } else { (p.file_name()? == "tern-relay").then_some(p) }
    })
}

/// One start of the relay as a person runs it (spawn mode, a state directory it makes), from
/// exec to the `Open` line on its stdout.
fn cold_start(bin: &Path, home: &Path) -> anyhow::Result<f64> {
    std::fs::create_dir_all(home)?;
    let started = Instant::now();
    let mut child = Command::new(bin)
        // --print-url: stdout is a pipe, where the relay would write the URL to a file instead.
        .args(["--listen", "127.0.0.1:0", "--print-url"])
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env("TERN_RELAY_TOKEN", "install-bench-token-0123456789")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first)?;
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    if !first.starts_with("Open http") {
        bail!("the relay printed {first:?}, not its URL");
    }
    Ok(elapsed.as_secs_f64() * 1000.0)
}

/// tests/dist/install-bench.mjs: the clean root, the mirror, the timed install; its JSON line.
fn install_in_clean_root(root: &Path, runs: usize) -> anyhow::Result<serde_json::Value> {
    let out = Command::new("node")
        .arg("tests/dist/install-bench.mjs")
        .args(["--runs", &runs.to_string(), "--json"])
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .context("running tests/dist/install-bench.mjs")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("install-bench.mjs failed ({}): {}", out.status, text.trim());
    }
    let last = text.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    serde_json::from_str(last).with_context(|| format!("no JSON line in: {text}"))
}

/// A temporary directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("tern-bench-install-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The install's target: clean root with mosh → printed URL.
pub const INSTALL_TARGET: Duration = Duration::from_secs(10);
/// The static binary's target size, stripped.
pub const BINARY_TARGET_BYTES: u64 = 15_000_000;
/// exec → printed URL.
pub const COLD_START_TARGET_MS: f64 = 100.0;

/// The suite's `install` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    progress("install: npm run dist, then the release in a clean Debian root");
    let run = match run(options.quick) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("install failed: {e:#}"));
            return;
        }
    };
    let target_s = INSTALL_TARGET.as_secs_f64();
    match run.install_to_url_ms {
        Some(ms) => report.row(
            format!(
                "install.sh from a local mirror: clean Debian 12 root with mosh → printed URL (median of {})",
                run.install_runs
            ),
            ms / 1000.0,
            "s",
            format!("≤ {target_s} s (building from source: docs/BENCHMARKS.md, \"Installing\")"),
            ms / 1000.0 <= target_s,
        ),
        None => report.pending(
            "install.sh from a local mirror: clean Debian 12 root with mosh → printed URL",
            &format!("≤ {target_s} s"),
            run.install_problem.as_deref().unwrap_or("not measured"),
        ),
    }
    for (target, bytes) in &run.binaries {
        report.row(
            format!("static tern-relay, stripped ({target})"),
            *bytes as f64 / 1e6,
            "MB",
            format!("≤ {} MB", BINARY_TARGET_BYTES / 1_000_000),
            *bytes <= BINARY_TARGET_BYTES,
        );
    }
    if let Some(p50) = quantile(&run.cold_start_ms, 0.5) {
        report.row(
            format!(
                "relay cold start: exec → printed URL (static x86_64, fresh state dir, median of {})",
                run.cold_start_ms.len()
            ),
            p50,
            "ms",
            format!("≤ {COLD_START_TARGET_MS} ms"),
            p50 <= COLD_START_TARGET_MS,
        );
    }
    let g = "install";
    for (arch, bytes) in &run.debs {
        report.detail(g, format!(".deb ({arch})"), *bytes as f64 / 1e6, "MB");
    }
    for (target, bytes) in &run.tarballs {
        report.detail(g, format!("tarball ({target})"), *bytes as f64 / 1e6, "MB");
    }
    if let Some(ms) = run.install_script_ms {
        report.detail(g, "install.sh alone (download, verify, install)", ms, "ms");
    }
    if let Some(ms) = run.relay_start_in_root_ms {
        report.detail(g, "relay start → URL inside the root", ms, "ms");
    }
    if let Some(p95) = quantile(&run.cold_start_ms, 0.95) {
        report.detail(g, "relay cold start p95", p95, "ms");
    }
}
