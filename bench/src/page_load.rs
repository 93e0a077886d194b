//! Page load to a usable prompt (the suite's `load` part, the budget the settings panel, clipboard
//! and downloads had to keep): this tree's page against the page as of [`BEFORE`], side by side
//! in one run, each served by the tern-relay it was built with
//! (`tests/browser/bench/load-bench.mjs`), and the bytes each page makes the browser fetch, raw and
//! `gzip -9`.
//!
//! The old page cannot be served by this tree's relay without rebuilding it (a relay embeds
//! `www/dist` at compile time), so [`relay_at`] builds the old tree once, page and relay, from
//! `git archive` of the commit into `target/bench-old-page/<commit>/` (one target directory,
//! `target/bench-old-page/target`, for every such commit: their dependencies are built once), and
//! keeps the binary there: later runs reuse it. The new side is this working tree, or with
//! `TERN_BENCH_LOAD_AT=<commit>` that commit, built the same way (a measurement of a committed
//! page while the working tree is half edited). Both relays are release builds (what people run).
//! Quick mode (`npm test`) builds nothing extra: it loads this tree's page on both sides (debug
//! relay), which proves the harness and measures nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::Options;
use crate::report::Report;
use crate::stats::{median, quantile};

/// The page before the settings panel, clipboard, keys and bell modules: the parent of 51a86c1.
pub const BEFORE: &str = "2c9525c";
/// The page-load budget: the page may load at most this much slower than before.
pub const TARGET_RATIO: f64 = 1.10;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root().join("target"), PathBuf::from)
}

fn run(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// This tree's page and relay: `scripts/build-wasm.sh` (a no-op when nothing changed), then
/// tern-relay, release or debug.
pub fn new_relay(release: bool) -> anyhow::Result<PathBuf> {
    run(
        Command::new("bash").arg("scripts/build-wasm.sh").current_dir(root()).stdout(Stdio::null()),
        "scripts/build-wasm.sh",
    )?;
    let profile: &[&str] = if release { &["--release"] } else { &[] };
    run(
        Command::new("cargo")
            .arg("build")
            .args(profile)
            .args(["-q", "-p", "tern-relay"])
            .current_dir(root()),
        "cargo build -p tern-relay",
    )?;
    Ok(target_dir().join(if release { "release" } else { "debug" }).join("tern-relay"))
}

/// The release tern-relay of `commit`, with the page of that commit embedded; built on first use
/// (about 4 minutes cold on two cores), then kept under `target/bench-old-page/<full hash>/`.
pub fn relay_at(commit: &str) -> anyhow::Result<(PathBuf, String)> {
    let out = Command::new("git")
        .args(["rev-parse", "--verify", &format!("{commit}^{{commit}}")])
        .current_dir(root())
        .output()
        .context("running git rev-parse")?;
    if !out.status.success() {
        bail!("no commit {commit} in this repository");
    }
    let hash = String::from_utf8(out.stdout)?.trim().to_string();
    let short = hash[..7].to_string();
    let dir = target_dir().join("bench-old-page").join(&hash);
    let bin = dir.join("tern-relay");
    if bin.is_file() {
        return Ok((bin, short));
    }
    eprintln!("[bench] load: building the page and relay of {commit} in {} (once)", dir.display());
    let src = dir.join("src");
    if src.exists() {
        std::fs::remove_dir_all(&src).with_context(|| format!("removing {}", src.display()))?;
    }
    std::fs::create_dir_all(&src)?;
    run(
        Command::new("sh")
            .arg("-c")
            // `-m`: the files get today's mtimes. cargo names a workspace crate's outputs by its
            // path relative to the workspace, so every commit's tern-web shares one output in the
            // shared target directory, judged fresh by mtime: with the commit's own (older)
            // mtimes another commit's build would pass for this one's.
            .arg(r#"git archive "$1" | tar -x -m -C "$2""#)
            .args(["sh", &hash])
            .arg(&src)
            .current_dir(root()),
        "git archive | tar -x",
    )?;
    // The old build script copies xterm.js from node_modules and runs npm's wasm-opt.
    std::os::unix::fs::symlink(root().join("node_modules"), src.join("node_modules"))
        .context("linking node_modules")?;
    let shared_target = target_dir().join("bench-old-page/target");
    run(
        Command::new("bash")
            .arg("scripts/build-wasm.sh")
            .env("CARGO_TARGET_DIR", &shared_target)
            .current_dir(&src)
            .stdout(Stdio::null()),
        &format!("{commit}'s scripts/build-wasm.sh"),
    )?;
    run(
        Command::new("cargo")
            .args(["build", "--release", "-q", "-p", "tern-relay"])
            .env("CARGO_TARGET_DIR", &shared_target)
            .current_dir(&src),
        &format!("{commit}'s cargo build --release -p tern-relay"),
    )?;
    let tmp = dir.join("tern-relay.tmp");
    std::fs::copy(shared_target.join("release/tern-relay"), &tmp)?;
    std::fs::rename(&tmp, &bin)?;
    Ok((bin, short))
}

/// One load, ms on the page's clock (navigation start = 0); see load-bench.mjs.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Load {
    pub prompt_ms: Option<f64>,
    pub buffer_ms: Option<f64>,
    pub wasm_ms: Option<f64>,
    pub script_ms: Option<f64>,
    pub connect_ms: Option<f64>,
    pub ready_ms: Option<f64>,
    pub frame_ms: Option<f64>,
    pub dom_content_loaded_ms: Option<f64>,
    pub html_ms: Option<f64>,
    /// Path → responseEnd.
    pub files: BTreeMap<String, f64>,
    /// The renderer's main thread up to the prompt (DevTools' Performance metrics): taskMs, jsMs,
    /// layoutMs, styleMs, layouts, styles, nodes.
    #[serde(default)]
    pub main: BTreeMap<String, f64>,
    /// CPU of Chromium's processes from navigation to the prompt: rendererMs, gpuMs, browserMs.
    #[serde(default)]
    pub cpu: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setting {
    pub latency_ms: f64,
    /// What the tab showed before the page: `blank` (a new tab) or `site` (another site's page).
    pub from: String,
    pub old: Vec<Load>,
    pub new: Vec<Load>,
}

/// One response of the inventory load.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fetched {
    pub path: String,
    pub status: u16,
    pub bytes: u64,
    pub gzip: u64,
    pub before_prompt: bool,
}

impl Fetched {
    /// `wasm`, `js`, `css` or `other` (HTML, icons, the manifest), by the path's extension.
    pub fn kind(&self) -> &'static str {
        match self.path.rsplit_once('.').map(|(_, e)| e) {
            Some("wasm") => "wasm",
            Some("js" | "mjs") => "js",
            Some("css") => "css",
            _ => "other",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Files {
    pub old: Vec<Fetched>,
    pub new: Vec<Fetched>,
}

/// What `load-bench.mjs --json` prints.
#[derive(Debug, Clone, Deserialize)]
pub struct LoadRun {
    pub runs: usize,
    pub settings: Vec<Setting>,
    pub files: Files,
}

/// Loads each page `runs` times per HTTP latency and start (`froms`: `blank`, `site`), in turns.
pub fn measure(
    old: &Path,
    new: &Path,
    runs: usize,
    latencies: &[u64],
    froms: &[&str],
) -> anyhow::Result<LoadRun> {
    let latency = latencies.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let out = Command::new("node")
        .arg("tests/browser/bench/load-bench.mjs")
        .arg("--old-relay")
        .arg(old)
        .arg("--new-relay")
        .arg(new)
        .args(["--runs", &runs.to_string(), "--latency", &latency, "--from", &froms.join(",")])
        .arg("--json")
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .context("running node tests/browser/bench/load-bench.mjs (is node installed?)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("node tests/browser/bench/load-bench.mjs failed ({}):\n{stdout}", out.status);
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no JSON line from load-bench.mjs:\n{stdout}"))?;
    serde_json::from_str(line).with_context(|| format!("parsing load-bench.mjs's JSON: {line}"))
}

/// How a row names its start: a new tab is the rows' name as it always was.
fn from_label(from: &str) -> &'static str {
    if from == "site" { ", from another site's page" } else { "" }
}

/// The suite's `load` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let quick = options.quick;
    let (runs, latencies): (usize, &[u64]) = if quick { (2, &[0]) } else { (10, &[0, 50]) };
    // A new tab (about:blank) and a tab that showed another site: they differ in whether Chromium
    // can give the page the tab's renderer process (load-bench.mjs, `--from`).
    let froms: &[&str] = if quick { &["blank"] } else { &["blank", "site"] };
    // Quick mode compares this page with itself: building the old tree takes minutes.
    let before =
        if quick { "this page (quick mode)".to_string() } else { format!("{BEFORE}'s page") };
    let at = std::env::var("TERN_BENCH_LOAD_AT").ok().filter(|c| !c.is_empty() && !quick);
    let mut this = "this page".to_string();
    let relays = match &at {
        Some(commit) => relay_at(commit).map(|(bin, short)| {
            this = format!("{short}'s page");
            bin
        }),
        None => new_relay(!quick),
    }
    .and_then(|new| {
        let old = if quick { new.clone() } else { relay_at(BEFORE)?.0 };
        Ok((old, new))
    });
    let run = match relays.and_then(|(old, new)| {
        crate::progress(&format!(
            "load: {runs} first visits of each page per HTTP latency {latencies:?} ms and start {froms:?}, in turns"
        ));
        measure(&old, &new, runs, latencies, froms)
    }) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("load failed: {e:#}"));
            return;
        }
    };
    for s in &run.settings {
        let prompt = |loads: &[Load]| loads.iter().filter_map(|l| l.prompt_ms).collect::<Vec<_>>();
        let (old, new) = (prompt(&s.old), prompt(&s.new));
        if let (Some(o), Some(n)) = (median(&old), median(&new)) {
            let ratio = n / o;
            report.row(
                format!(
                    "page load to a usable prompt, median, {this} / {before}, HTTP latency {} ms{}",
                    s.latency_ms,
                    from_label(&s.from)
                ),
                ratio,
                "x",
                format!("≤ {TARGET_RATIO:.2} ({n:.0} / {o:.0} ms)"),
                ratio <= TARGET_RATIO,
            );
        }
        let group = format!("load, HTTP latency {} ms{}", s.latency_ms, from_label(&s.from));
        for (side, loads) in [(this.as_str(), &s.new), (before.as_str(), &s.old)] {
            for (what, pick) in [
                (
                    "navigation → prompt rendered by xterm.js",
                    (|l: &Load| l.prompt_ms) as fn(&Load) -> Option<f64>,
                ),
                ("navigation → app.js started (its imports loaded)", |l| l.script_ms),
                ("navigation → wasm instantiated", |l| l.wasm_ms),
                ("navigation → first request to the relay", |l| l.connect_ms),
                ("navigation → relay's ready", |l| l.ready_ms),
                ("navigation → first frame written to xterm.js", |l| l.frame_ms),
            ] {
                let v: Vec<f64> = loads.iter().filter_map(pick).collect();
                if let (Some(m), Some(p)) = (median(&v), quantile(&v, 0.9)) {
                    report.detail(&group, format!("{side}: {what}, median"), m, "ms");
                    if what.contains("prompt") {
                        report.detail(&group, format!("{side}: {what}, p90"), p, "ms");
                    }
                }
            }
            // Where the CPU went, navigation → prompt.
            for (map, key, what) in [
                (0, "rendererMs", "CPU of Chromium's renderer processes (all threads)"),
                (0, "gpuMs", "CPU of Chromium's GPU process"),
                (0, "browserMs", "CPU of Chromium's browser and utility processes"),
                (1, "taskMs", "renderer main thread busy (DevTools TaskDuration)"),
                (1, "jsMs", "of which script and wasm (ScriptDuration)"),
                (1, "styleMs", "of which style recalculation"),
                (1, "layoutMs", "of which layout"),
                (1, "nodes", "DOM nodes at the prompt"),
            ] {
                let v: Vec<f64> = loads
                    .iter()
                    .filter_map(|l| if map == 0 { &l.cpu } else { &l.main }.get(key).copied())
                    .collect();
                if let Some(m) = median(&v) {
                    let unit = if key == "nodes" { "" } else { "ms" };
                    report.detail(&group, format!("{side}: {what}, median"), m, unit);
                }
            }
            report.detail(&group, format!("{side}: loads"), loads.len() as f64, "");
            // When each file had arrived: which one the prompt waits for.
            let mut paths: Vec<&String> = loads.iter().flat_map(|l| l.files.keys()).collect();
            paths.sort();
            paths.dedup();
            for path in paths.into_iter().filter(|p| !p.starts_with("/api/")) {
                let v: Vec<f64> = loads.iter().filter_map(|l| l.files.get(path).copied()).collect();
                if let Some(m) = median(&v) {
                    report.detail(
                        &group,
                        format!("{side}: navigation → {path} received, median"),
                        m,
                        "ms",
                    );
                }
            }
        }
    }
    let gzip = |files: &[Fetched], kinds: &[&str]| -> u64 {
        files.iter().filter(|f| kinds.contains(&f.kind())).map(|f| f.gzip).sum()
    };
    let (old_gz, new_gz) =
        (gzip(&run.files.old, &["wasm", "js"]), gzip(&run.files.new, &["wasm", "js"]));
    if old_gz > 0 {
        let (o, n) = (old_gz as f64 / 1000.0, new_gz as f64 / 1000.0);
        report.row(
            "gzip -9 size of the wasm and JS the page loads",
            n,
            "KB",
            format!("≤ {TARGET_RATIO:.2} x {before} ({o:.1} KB; the load budget applied to bytes)"),
            n <= TARGET_RATIO * o,
        );
    }
    for (side, files) in [(this.as_str(), &run.files.new), (before.as_str(), &run.files.old)] {
        let group = "load: files fetched (first visit)";
        for kinds in [&["wasm", "js"][..], &["wasm", "js", "css"], &["wasm", "js", "css", "other"]]
        {
            let label = kinds.join(" + ");
            let sel = files.iter().filter(|f| kinds.contains(&f.kind()));
            let (raw, gz): (u64, u64) =
                sel.clone().fold((0, 0), |(r, g), f| (r + f.bytes, g + f.gzip));
            report.detail(group, format!("{side}: {label}, raw"), raw as f64, "B");
            report.detail(group, format!("{side}: {label}, gzip -9"), gz as f64, "B");
        }
        let before_prompt: u64 =
            files.iter().filter(|f| f.before_prompt && f.kind() != "other").map(|f| f.gzip).sum();
        report.detail(
            group,
            format!("{side}: wasm + js + css before the prompt, gzip -9"),
            before_prompt as f64,
            "B",
        );
        report.detail(group, format!("{side}: files"), files.len() as f64, "");
        for f in files.iter().filter(|f| f.kind() != "other") {
            let when = if f.before_prompt { "" } else { " (after the prompt)" };
            report.detail(group, format!("{side}: {}{when}, raw", f.path), f.bytes as f64, "B");
            report.detail(group, format!("{side}: {}{when}, gzip -9", f.path), f.gzip as f64, "B");
        }
    }
    for (side, files) in [(this.as_str(), &run.files.new), (before.as_str(), &run.files.old)] {
        if let Some(f) = files.iter().find(|f| f.status >= 400) {
            report
                .problems
                .push(format!("load: {side} fetched {} with status {}", f.path, f.status));
        }
    }
}

/// A row of `load-bench.mjs --floor` (issue 36), as it prints it in its JSON.
#[derive(Debug, Clone, Deserialize)]
pub struct FloorRow {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub target: String,
    pub ok: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct FloorRun {
    #[serde(default)]
    rows: Vec<FloorRow>,
}

/// The suite's first-prompt rows (issue 36, docs/BENCHMARKS.md "First prompt and the floor"):
/// this page's first usable prompt next to the floor (`/floor.html`: the same xterm.js drawing a
/// fixed prompt, no session), served by the same relay in the same run, on loopback and at 50 ms
/// RTT and 10 Mbit/s (HTTP by Chromium's emulation, WebTransport through linkemu), each a first
/// visit and a repeat visit. load-bench.mjs computes
/// the rows and their targets; they are copied here.
pub fn floor_rows(options: &Options, report: &mut Report) {
    let runs = if options.quick { 2 } else { 10 };
    let settings: &[(&str, Option<&str>)] =
        if options.quick { &[("0", None)] } else { &[("0", None), ("50", Some("10"))] };
    let new = match new_relay(!options.quick) {
        Ok(new) => new,
        Err(e) => {
            report.problems.push(format!("first prompt: {e:#}"));
            return;
        }
    };
    for &(latency, throughput) in settings {
        crate::progress(&format!(
            "first prompt: {runs} loads of the page and of the floor, HTTP latency {latency} ms"
        ));
        let mut cmd = Command::new("node");
        cmd.arg("tests/browser/bench/load-bench.mjs").arg("--new-relay").arg(&new).args([
            "--floor",
            "--repeat",
            "--runs",
            &runs.to_string(),
            "--latency",
            latency,
        ]);
        if let Some(mbit) = throughput {
            // WebTransport through linkemu too: the rows count round trips.
            cmd.args(["--throughput", mbit, "--emulate-wt"]);
        }
        let run =
            cmd.arg("--json")
                .current_dir(root())
                .stderr(Stdio::inherit())
                .output()
                .context("running node tests/browser/bench/load-bench.mjs --floor")
                .and_then(|out| {
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    if !out.status.success() {
                        bail!("load-bench.mjs --floor failed ({}):\n{stdout}", out.status);
                    }
                    let line =
                        stdout.lines().rev().find(|l| l.starts_with('{')).with_context(|| {
                            format!("no JSON line from load-bench.mjs:\n{stdout}")
                        })?;
                    Ok(serde_json::from_str::<FloorRun>(line)?)
                });
        match run {
            Ok(run) => {
                for r in run.rows {
                    report.row(r.name, r.value, &r.unit, r.target, r.ok);
                }
            }
            Err(e) => report.problems.push(format!("first prompt failed: {e:#}")),
        }
    }
}
