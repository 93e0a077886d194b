//! Tern in the browser: the scenarios that need headless Chromium run as Node scripts under
//! `tests/browser/` (they reuse its helpers: the real tern-relay, linkemu, Chromium through
//! playwright-core) and print one JSON object on their last line, which is parsed here.
//!
//! - [`echo`]: `echo-bench.mjs`, keystroke echo through linkemu at one RTT (issue row 1).
//! - [`paste`]: `paste-bench.mjs`, a picture pasted over a rate-limited link (issue row 3).
//! - [`download`]: `download-bench.mjs`, `tern send FILE` over a rate-limited link (issue 15).
//! - [`resume`]: `resume-bench.mjs`, reloads of a page with a running shell (issue 13).
//!
//! A missing `node`, Chromium or mosh-server makes the script fail, and that failure is returned
//! as an error (the suite lists it as a problem, and the quick test fails on problems): a
//! benchmark that silently skipped would hide a broken harness.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The repository root: the scripts import `tests/browser/lib/helpers.mjs`, which builds the relay
/// there (with `CARGO_TARGET_DIR` from the environment, inherited).
fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Builds the page (`scripts/build-wasm.sh`, a no-op when its inputs are unchanged) once per
/// run: tern-relay embeds `relay/page` when it is built, and neither `npm run bench` nor the `test`
/// stage of `npm test` (which comes before its `wasm` stage) has built it in a fresh clone.
fn build_page() -> anyhow::Result<()> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        let status = Command::new("bash")
            .arg("scripts/build-wasm.sh")
            .current_dir(root())
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("running scripts/build-wasm.sh: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("scripts/build-wasm.sh failed ({status})"))
        }
    });
    result.clone().map_err(anyhow::Error::msg)
}

/// Runs `node tests/browser/bench/<script> <args> --json` and parses its last line.
fn node_json<T: for<'de> Deserialize<'de>>(script: &str, args: &[String]) -> anyhow::Result<T> {
    node_json_with(script, args, &[])
}

fn node_json_with<T: for<'de> Deserialize<'de>>(
    script: &str,
    args: &[String],
    env: &[(&str, String)],
) -> anyhow::Result<T> {
    build_page()?;
    let out = Command::new("node")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .arg(format!("tests/browser/bench/{script}"))
        .args(args)
        .arg("--json")
        .current_dir(root())
        .output()
        .with_context(|| format!("running tests/browser/bench/{script} (is node installed?)"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("node tests/browser/bench/{script} failed ({}):\n{}", out.status, tail.join("\n"));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no JSON line from {script}:\n{stdout}"))?;
    serde_json::from_str(line).with_context(|| format!("parsing {script}'s JSON: {line}"))
}

/// One RTT of `echo-bench.mjs`, all times in ms on the page's clock, one entry per counted key
/// (`None`: no echo seen, or no datagram written before the next key).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EchoRun {
    /// Key handed to xterm.js → the frame showing the letter handed to xterm.js (its paint, a
    /// local frame at most, is not included).
    pub screen_ms: Vec<Option<f64>>,
    /// Key handed to xterm.js → the next datagram handed to WebTransport (the page's key-to-wire).
    pub send_ms: Vec<Option<f64>>,
    pub missing: usize,
    /// The page's own echo statistic (docs/BROWSER.md), last samples.
    pub core_echo_ms: Vec<f64>,
    pub srtt_ms: f64,
    pub dropped_unknown_base: f64,
    /// Navigation start → the first frame with the server's screen.
    pub first_frame_ms: Option<f64>,
    /// Each key's echo split by hop (WebTransport runs).
    pub hops: Option<Hops>,
}

/// Per key (ms, on the machine's wall clock), `echo-bench.mjs --hops`: where a key's echo time
/// goes, from the page's datagram writes and reads and tern-relay's trace of what it forwarded.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hops {
    /// Key handed to xterm.js → its datagram handed to WebTransport.
    pub key_to_write: Vec<f64>,
    /// Written → tern-relay received it (Chromium's QUIC, the emulated RTT/2, wtransport).
    pub up: Vec<f64>,
    /// tern-relay → mosh-server → tern-relay: the server's turn, mostly its frame pacing.
    pub server: Vec<f64>,
    /// tern-relay sent the echo frame → the page read it (wtransport, RTT/2, Chromium).
    pub down: Vec<f64>,
    /// Read → the frame written to xterm.js (the core and the page's drawing).
    pub read_to_screen: Vec<f64>,
}

impl EchoRun {
    pub fn screen(&self) -> Vec<f64> {
        self.screen_ms.iter().flatten().copied().collect()
    }

    pub fn send(&self) -> Vec<f64> {
        self.send_ms.iter().flatten().copied().collect()
    }
}

/// How the page reaches tern-relay in `echo-bench.mjs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    WebTransport,
    /// UDP silently dropped: the page waits out its WebTransport patience, then falls back.
    WebSocket,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::WebTransport => "webtransport",
            Transport::WebSocket => "websocket",
        }
    }
}

/// The shape of the WebTransport datagram API the page meets in `echo-bench.mjs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramApi {
    /// Chromium's own: the `datagrams.writable` getter.
    Chromium,
    /// Safari's (WebKit, 26.4+): no getter, only `datagrams.createWritable()`, made in Chromium
    /// by `tests/browser/lib/safari-shape.mjs` over Chromium's own datagram writable.
    Safari,
}

impl DatagramApi {
    pub fn as_str(self) -> &'static str {
        match self {
            DatagramApi::Chromium => "chromium",
            DatagramApi::Safari => "safari",
        }
    }
}

/// Types `keys` letters (after `warmup`) at the prompt of a browser session behind an emulated
/// link of `rtt_ms` (both the page's TCP and its UDP). With `loss_percent`, the run happens in a
/// network namespace behind linkemu's TUN link, so TCP's own retransmissions are measured.
/// `api`: the datagram API's shape (WebTransport only).
pub fn echo(
    transport: Transport,
    api: DatagramApi,
    rtt_ms: u64,
    loss_percent: Option<f64>,
    warmup: usize,
    keys: usize,
    seed: u64,
) -> anyhow::Result<EchoRun> {
    let args = [
        "--transport".to_string(),
        transport.as_str().to_string(),
        "--rtt".into(),
        rtt_ms.to_string(),
        "--warmup".into(),
        warmup.to_string(),
        "--keys".into(),
        keys.to_string(),
        "--gaps".into(),
        crate::echo::typing_gaps(seed, warmup + keys)
            .iter()
            .map(|g| g.as_millis().to_string())
            .collect::<Vec<_>>()
            .join(","),
    ];
    let mut args = args.to_vec();
    // WebTransport runs also split each echo by hop (the relay's trace log, one line per
    // datagram, costs nothing measurable).
    if transport == Transport::WebTransport && loss_percent.is_none() {
        args.push("--hops".into());
    }
    if let Some(loss) = loss_percent {
        args.extend(["--loss".into(), loss.to_string()]);
    }
    if api != DatagramApi::Chromium {
        args.extend(["--datagram-api".into(), api.as_str().into()]);
    }
    node_json("echo-bench.mjs", &args)
}

/// Median, p90 and count of a set of echo samples, as `paste-bench.mjs` reports them (`null`
/// when no key was timed).
#[derive(Debug, Clone, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: Option<f64>,
    pub p90: Option<f64>,
}

/// The pacer's view over the middle of the upload.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pacer {
    pub rate_median_bps: Option<f64>,
    pub window_median_bytes: Option<f64>,
    pub in_flight_median_bytes: Option<f64>,
    pub min_rtt_ms: Option<f64>,
    pub mosh_srtt_median_ms: Option<f64>,
}

/// What `paste-bench.mjs --json` prints (the fields the suite uses).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PasteRun {
    pub size: u64,
    pub rate: String,
    pub rtt_ms: f64,
    pub queue: String,
    /// First content byte written → the relay's path arrives.
    pub upload_ms: f64,
    /// `size` x 8 / the link's rate.
    pub limit_ms: f64,
    pub ratio: f64,
    pub echo_idle_ms: Summary,
    pub echo_during_ms: Summary,
    pub repeat_bytes_sent: f64,
    pub srtt_idle_ms: Option<f64>,
    pub pacer: Pacer,
}

/// The paste scenario's link and sizes.
#[derive(Debug, Clone)]
pub struct PasteSetup {
    pub size: u64,
    pub rate: &'static str,
    pub rtt_ms: u64,
    pub queue: &'static str,
    /// Keys timed while idle (those during the upload last as long as it does).
    pub keys: usize,
}

impl PasteSetup {
    /// The command line of paste-bench.mjs and download-bench.mjs, which share it.
    fn args(&self) -> [String; 10] {
        [
            "--size".to_string(),
            self.size.to_string(),
            "--rate".into(),
            self.rate.into(),
            "--rtt".into(),
            self.rtt_ms.to_string(),
            "--queue".into(),
            self.queue.into(),
            "--keys".into(),
            self.keys.to_string(),
        ]
    }
}

pub fn paste(setup: &PasteSetup) -> anyhow::Result<PasteRun> {
    let run: PasteRun = node_json("paste-bench.mjs", &setup.args())?;
    // paste-bench.mjs subtracts medians even when a side has none; such a run measured nothing.
    if run.echo_idle_ms.n == 0 || run.echo_during_ms.n == 0 {
        bail!(
            "paste: no keys timed ({} idle, {} during the upload); the upload was too short",
            run.echo_idle_ms.n,
            run.echo_during_ms.n
        );
    }
    Ok(run)
}

/// What the page saw of the relay's pacer during a download.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadPage {
    /// `stats().download.rate` (bytes/s over about a second) x 8, median over the middle.
    pub rate_median_bps: Option<f64>,
    /// Bytes at the page per second of the download x 8, median.
    pub goodput_median_bps: Option<f64>,
    /// The longest the page's byte count stood still (sampled every 20 ms).
    pub max_read_gap_ms: Option<f64>,
    pub mosh_srtt_median_ms: Option<f64>,
}

/// What `download-bench.mjs --json` prints (the fields the suite uses), ms on the page's clock.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadRun {
    pub size: u64,
    pub rate: String,
    pub rtt_ms: f64,
    pub queue: String,
    /// The first byte at the page → the checked file handed to the browser (its download).
    pub download_ms: f64,
    /// `size` x 8 / the link's rate.
    pub limit_ms: f64,
    pub ratio: f64,
    /// The offer seen by the page → the download.
    pub offer_to_saved_ms: f64,
    pub offer_to_first_byte_ms: f64,
    /// First byte → last byte at the page.
    pub receive_ms: f64,
    /// Last byte → the download (the SHA-256 check and the save).
    pub verify_ms: f64,
    pub echo_idle_ms: Summary,
    pub echo_during_ms: Summary,
    pub srtt_idle_ms: Option<f64>,
    pub page: DownloadPage,
}

/// `tern send FILE` in the shell of a browser session behind an emulated link: sizes and link as
/// the paste scenario's.
pub fn download(setup: &PasteSetup) -> anyhow::Result<DownloadRun> {
    let run: DownloadRun = node_json("download-bench.mjs", &setup.args())?;
    if run.echo_idle_ms.n == 0 || run.echo_during_ms.n == 0 {
        bail!(
            "download: no keys timed ({} idle, {} during the download); it was too short",
            run.echo_idle_ms.n,
            run.echo_during_ms.n
        );
    }
    Ok(run)
}

/// What `resume-bench.mjs --json` prints: per reload, ms on the reloaded page's clock.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeRun {
    /// The page's script started → the saved screen drawn.
    pub old_screen_ms: Vec<f64>,
    /// The relay's `ready` on the new link → the first new server state.
    pub live_ms: Vec<f64>,
    /// The page's first request to the relay → the first new server state.
    pub live_from_request_ms: Vec<f64>,
    /// Navigation start → the saved screen drawn, and → live.
    pub nav_to_old_ms: Vec<f64>,
    pub nav_to_live_ms: Vec<f64>,
}

/// Reloads a page with a running shell `reloads` times behind an emulated link of `rtt_ms`.
pub fn resume(rtt_ms: u64, reloads: usize) -> anyhow::Result<ResumeRun> {
    let args = ["--rtt".to_string(), rtt_ms.to_string(), "--reloads".into(), reloads.to_string()];
    node_json("resume-bench.mjs", &args)
}

/// What `history-bench.mjs --json` prints.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRun {
    pub history_lines: u64,
    /// Numbers found in the history and the screen, in order, once, in percent of those printed.
    pub completeness: f64,
    /// A wheel turn up at the top of the page's scrollback → the history view's lines drawn.
    pub first_page_ms: Vec<f64>,
    /// A search for one line of the whole history → its match drawn.
    pub search_ms: Vec<f64>,
    pub disk_bytes: f64,
    pub recorder_rss_kb: f64,
    pub relay_rss_kb: f64,
}

/// `seq 1 LINES` in a spawned shell, then the history read and searched; with `release`, by a
/// release relay (what people run; the browser tests and quick mode use the debug one).
pub fn history(lines: u64, repeat: usize, release: bool) -> anyhow::Result<HistoryRun> {
    let args = ["--lines".to_string(), lines.to_string(), "--repeat".into(), repeat.to_string()];
    let env = if release {
        let relay = crate::page_load::new_relay(true)?;
        vec![("TERN_RELAY_BIN", relay.to_string_lossy().into_owned())]
    } else {
        Vec::new()
    };
    node_json_with("history-bench.mjs", &args, &env)
}

/// What `recorder_echo --json` (relay/examples) prints: key-to-echo through a pty, µs.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecorderEcho {
    pub direct_median_us: f64,
    pub recorded_median_us: f64,
    pub direct_p99_us: f64,
    pub recorded_p99_us: f64,
    /// The recorder with `--no-images` (no image lifting), in the same run.
    pub no_images_median_us: f64,
    pub no_images_p99_us: f64,
    /// The recorder recording the session (`--cast-bytes`, `--record-sessions`), same run.
    #[serde(default)]
    pub cast_median_us: Option<f64>,
    #[serde(default)]
    pub cast_p99_us: Option<f64>,
}

/// The recorder's cost on a key's echo, side by side with a pty without it (`release`: built
/// optimized, as tern-relay is installed).
/// `aa`: the image-lifting recorder runs with `--no-images` too (an A/A run).
pub fn recorder_echo(keys: usize, release: bool, aa: bool) -> anyhow::Result<RecorderEcho> {
    let profile: &[&str] = if release { &["--release"] } else { &[] };
    let aa: &[&str] = if aa { &["--aa"] } else { &[] };
    let out = Command::new("cargo")
        .arg("run")
        .args(profile)
        .args(["-q", "-p", "tern-relay", "--example", "recorder_echo", "--"])
        .args([keys.to_string(), "1000".into(), "--json".into()])
        .args(aa)
        .current_dir(root())
        .output()
        .context("running the recorder_echo example")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("recorder_echo failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    let line =
        stdout.lines().rev().find(|l| l.starts_with('{')).context("no JSON from recorder_echo")?;
    serde_json::from_str(line).with_context(|| format!("parsing recorder_echo's JSON: {line}"))
}

/// One scenario of `frame-cost-bench.mjs`: CPU seconds of Chromium's processes over `seconds`,
/// what the page did meanwhile, and the page's own split in ms.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostScenario {
    pub cols: u16,
    pub rows: u16,
    pub renderer: String,
    pub seconds: f64,
    pub renderer_cpu_s: f64,
    pub gpu_cpu_s: f64,
    pub browser_cpu_s: f64,
    pub states: f64,
    pub writes: f64,
    /// decryptMs, inflateMs, applyMs, diffMs, writeMs, bytesWritten, datagrams.
    pub page: std::collections::BTreeMap<String, f64>,
    /// The renderer's main thread by where its time went (ms), from the sampling profiler.
    pub profile: Option<std::collections::BTreeMap<String, f64>>,
    pub profile_states: Option<f64>,
    /// Hidden scenarios: how the server's pace came back once the page was shown again.
    pub after_shown: Option<AfterShown>,
}

/// The first seconds after a hidden page is shown again (`frame-cost-bench.mjs`, `afterShown`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AfterShown {
    pub states_first_second: f64,
    /// When a whole second first brought a full pace of states again (s after showing).
    pub full_pace_after_s: Option<f64>,
}

/// What `frame-cost-bench.mjs --json` prints: each scenario, and the commands typed for each.
#[derive(Debug, Clone, Deserialize)]
pub struct CostRun {
    pub scenarios: std::collections::BTreeMap<String, CostScenario>,
    pub commands: std::collections::BTreeMap<String, String>,
}

/// The page's cost per frame in `scenarios` with xterm.js's `renderer` (`auto`, `dom`, `webgl`).
pub fn frame_cost(
    seconds: u64,
    renderer: &str,
    scenarios: &[&str],
    profile: bool,
) -> anyhow::Result<CostRun> {
    let mut args = vec![
        "--seconds".to_string(),
        seconds.to_string(),
        "--renderer".into(),
        renderer.to_string(),
        "--scenarios".into(),
        scenarios.join(","),
    ];
    if profile {
        args.push("--profile".into());
    }
    node_json("frame-cost-bench.mjs", &args)
}

/// The `tern show` scenario's picture, link and counts.
#[derive(Debug, Clone)]
pub struct ShowSetup {
    /// Bytes of each picture timed (a PNG of noise: nothing on the path compresses it).
    pub size: u64,
    pub rate: &'static str,
    pub rtt_ms: u64,
    pub queue: &'static str,
    /// Pictures timed (medians over them).
    pub shows: usize,
    /// Keys timed while idle.
    pub keys: usize,
    /// Small pictures printed and scrolled past before the page's memory is read.
    pub many: usize,
}

/// One picture's times, ms on the page's clock.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShowOne {
    pub enter_to_marker_ms: f64,
    pub marker_to_drawn_ms: f64,
    pub enter_to_drawn_ms: f64,
}

/// The page after `many` pictures: bytes of proportional set size, the JS heap.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShowMany {
    pub printed: usize,
    pub placed: usize,
    pub decoded_held: usize,
    pub browser_pss_before: f64,
    pub browser_pss_after: f64,
    pub renderer_pss_before: f64,
    pub renderer_pss_after: f64,
    pub js_heap_before: Option<f64>,
    pub js_heap_after: Option<f64>,
}

/// What `show-bench.mjs --json` prints (the fields the suite uses).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShowRun {
    pub size: u64,
    pub rate: String,
    pub rtt_ms: f64,
    pub queue: String,
    pub shows: Vec<ShowOne>,
    /// `size` x 8 / the link's rate.
    pub limit_ms: f64,
    /// Medians over `shows`.
    pub marker_to_drawn_ms: f64,
    pub enter_to_marker_ms: f64,
    pub enter_to_drawn_ms: f64,
    pub ratio: f64,
    pub ratio_from_enter: f64,
    pub echo_idle_ms: Summary,
    pub echo_during_ms: Summary,
    pub many: ShowMany,
}

/// `tern show` of pictures in a browser session behind an emulated link, then many pictures
/// scrolled past.
pub fn show(setup: &ShowSetup) -> anyhow::Result<ShowRun> {
    let args = [
        ("--size", setup.size.to_string()),
        ("--rate", setup.rate.to_string()),
        ("--rtt", setup.rtt_ms.to_string()),
        ("--queue", setup.queue.to_string()),
        ("--shows", setup.shows.to_string()),
        ("--keys", setup.keys.to_string()),
        ("--many", setup.many.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect::<Vec<_>>();
    let run: ShowRun = node_json("show-bench.mjs", &args)?;
    if run.echo_idle_ms.n == 0 || run.echo_during_ms.n == 0 {
        bail!(
            "show: no keys timed ({} idle, {} while a picture came)",
            run.echo_idle_ms.n,
            run.echo_during_ms.n
        );
    }
    Ok(run)
}

/// What `relay/tests/viewers_bench.rs` prints on its `viewers-json` line.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewersRun {
    pub viewers: usize,
    pub keys: usize,
    /// The owner's key-to-echo, median, with no viewer and with `viewers`, ms.
    pub owner_alone_p50_ms: f64,
    pub owner_watched_p50_ms: f64,
    /// Each viewer's `screen` line after a key minus the owner's echo, over all viewers and keys.
    pub lag_median_ms: f64,
    pub lag_p95_ms: f64,
    pub lag_samples: usize,
    /// The process's RSS growth per viewer (relay and the viewers' client side: an upper bound).
    pub kib_per_viewer: f64,
}

/// `viewers` WebSocket viewers watching one session while its owner types `keys` keys per phase
/// (the ignored test relay/tests/viewers_bench.rs, optimized when `release`).
pub fn viewers(viewers: usize, keys: usize, release: bool) -> anyhow::Result<ViewersRun> {
    let profile: &[&str] = if release { &["--release"] } else { &[] };
    let out = Command::new("cargo")
        .arg("test")
        .args(profile)
        .args(["-q", "-p", "tern-relay", "--test", "viewers_bench", "--"])
        .args(["--ignored", "--nocapture", "--exact", "viewers_bench"])
        .env("TERN_VIEWERS", viewers.to_string())
        .env("TERN_KEYS", keys.to_string())
        .current_dir(root())
        .output()
        .context("running relay/tests/viewers_bench.rs")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "viewers_bench failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("viewers-json "))
        .context("no viewers-json line from viewers_bench")?;
    serde_json::from_str(line).with_context(|| format!("parsing viewers_bench's JSON: {line}"))
}
