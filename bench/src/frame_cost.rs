//! The stock mosh-client's side of the cost of a frame (issue 17): the same commands as
//! `tests/browser/bench/frame-cost-bench.mjs` types into Tern's page, typed into mosh-client in tmux at
//! the page's size, each with its own mosh-server on loopback. CPU time of mosh-client and of the
//! tmux server that draws its window, from /proc; frames are the server instructions that drew
//! something, as the decrypting tap saw them reach mosh-client.

use std::time::{Duration, Instant};

use anyhow::Context;
use tern_tests::linkemu::Dir;

use crate::decode::decode;
use crate::link::{Link, connect_mosh_sized};

/// What mosh-client and tmux spent over a window.
#[derive(Debug, Clone)]
pub struct MoshCost {
    pub seconds: f64,
    pub client_cpu_s: f64,
    pub tmux_cpu_s: f64,
    pub frames: u64,
}

impl MoshCost {
    /// mosh-client's CPU per frame it received, ms.
    pub fn client_ms_per_frame(&self) -> Option<f64> {
        (self.frames > 0).then(|| self.client_cpu_s * 1000.0 / self.frames as f64)
    }
}

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("short stat")?.parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name; clock ticks are
    // 1/100 s on Linux.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// Runs `command` in mosh-client (a `cols` x `rows` window), waits `settle`, then measures for
/// `seconds`.
pub fn mosh_client(
    command: &str,
    cols: u16,
    rows: u16,
    settle: Duration,
    seconds: f64,
    seed: u64,
) -> anyhow::Result<MoshCost> {
    let link = Link::start(Duration::ZERO, seed)?;
    let mosh = connect_mosh_sized(&link, cols, rows)?;
    let client = mosh.client_pid().context("mosh-client's pid")?;
    let tmux = mosh.tmux_server_pid().context("the tmux server's pid")?;
    let mut control = mosh.control().context("tmux control mode")?;
    if !command.is_empty() {
        control.send_keys(format!("{command}\r").as_bytes()).context("tmux")?;
    }
    std::thread::sleep(settle);
    let (c0, t0, from) = (cpu_seconds(client)?, cpu_seconds(tmux)?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (c1, t1, to) = (cpu_seconds(client)?, cpu_seconds(tmux)?, Instant::now());
    // Stop the command before the tap is read, so the log stops growing.
    let _ = control.send_keys(b"\x03");
    drop(control);
    drop(mosh);
    let events = decode(&link.server.key, &link.tap.take());
    let frames = events
        .iter()
        .filter(|e| e.dir == Dir::Down && e.draws())
        .filter(|e| e.released.is_some_and(|at| at >= from && at <= to))
        .count() as u64;
    Ok(MoshCost {
        seconds: (to - from).as_secs_f64(),
        client_cpu_s: c1 - c0,
        tmux_cpu_s: t1 - t0,
        frames,
    })
}
