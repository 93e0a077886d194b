//! Benchmark: what `tern-relay record` (the pty recorder of issue 14) adds to a key's echo.
//!
//! Three programs echo each key they read, each on a pty of its own whose master this benchmark
//! holds (as mosh-server holds the user's): `cat -u` on a raw terminal, directly, under the
//! recorder with its image lifting (issue 34; the default) and under the recorder with
//! `--no-images` (every byte through as it came, the recorder before image lifting), and under
//! the recorder recording the session (`--cast-bytes`, the relay's `--record-sessions`, issue
//! 35); the recorder then runs `cat -u` on a raw pty of its own. The echo goes through
//! the program, not the line discipline, as a shell's (readline's) does. One byte is written to
//! the master and timed until it comes back; the setups take turns in batches (each first, second,
//! third and last in turn, forwards and backwards), so that the machine's noise falls on all
//! alike, and every such round runs on freshly started processes. Prints the median, p90 and
//! p99 of each and the difference of the medians; asserts nothing.
//!
//! `cargo run --release -p tern-relay --example recorder_echo [KEYS] [GAP_US] [--json] [--aa]`:
//! KEYS per setup (2000), GAP_US the pause between keys in µs (1000; typing is far slower, but
//! the programs sleep between keys either way); `--aa` runs the image-lifting setup with
//! `--no-images` too (an A/A run: the difference is the machine's noise).
//!
//! The recorder is this same executable run as `recorder_echo record ...`: it calls
//! `tern_relay::history::record::run` exactly as `tern-relay record` does (an example cannot rely
//! on cargo having built the `tern-relay` binary).

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{OptionalActions, Winsize, tcgetattr, tcsetattr, tcsetwinsize};

/// On the echoing pty: raw, no echo of its own, then say so and echo every byte as it comes.
const ECHO: &str = "stty raw -echo && printf R && exec cat -u";
const BATCH: usize = 100;
const WARMUP: usize = 50;
/// Batches between two starts of fresh processes (one whole rotation of the four setups).
const ROUND_BATCHES: usize = 4;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    if first.as_deref().is_some_and(|a| a == "record") {
        // The recorder, as `tern-relay record ARGS` runs it.
        std::process::exit(match tern_relay::history::record::main(args) {
            c if c == std::process::ExitCode::SUCCESS => 0,
            _ => 1,
        });
    }
    let json = std::env::args().any(|a| a == "--json");
    let number = |a: Option<OsString>, default: u64| {
        a.and_then(|a| a.to_str()?.parse().ok()).unwrap_or(default)
    };
    let keys = usize::try_from(number(first, 2000)).unwrap_or(2000).max(BATCH);
    let gap = Duration::from_micros(number(args.next(), 1000));

    let history = tempfile::tempdir().expect("a temporary directory");
    let me = std::env::current_exe().expect("this executable");
    let recorder = |session: &str, images: bool, cast: bool| {
        let mut c = Command::new(&me);
        c.arg("record").arg("--history-dir").arg(history.path()).args(["--session", session]);
        if !images {
            c.arg("--no-images");
        }
        if cast {
            c.args(["--cast-bytes", "67108864"]);
        }
        Echo::start(c.args(["--", "sh", "-c", ECHO]))
    };
    // `--aa`: both recorders without images, to see the noise between two identical setups.
    let aa = std::env::args().any(|a| a == "--aa");
    // A session of its own for each recorder of each round (its history and recording files).
    let mut round = 0u64;
    let mut start = || {
        round += 1;
        let mut setups = [
            Echo::start(Command::new("sh").args(["-c", ECHO])),
            recorder(&format!("{round:014x}ef"), !aa, false),
            recorder(&format!("{round:014x}ee"), false, false),
            recorder(&format!("{round:014x}ed"), !aa, true),
        ];
        for _ in 0..WARMUP {
            for e in setups.iter_mut() {
                e.key(gap);
            }
        }
        setups
    };
    let mut setups = start();

    let mut times: [Vec<Duration>; 4] = Default::default();
    for batch in 0..keys.div_ceil(BATCH) {
        // Fresh processes every round of batches: where the scheduler placed each setup's
        // processes (which core, next to what) stays for a process's life and biased a whole run
        // by several µs (A/A ratios of 0.45-1.26 between two identical setups); new ones each
        // round spread that over the setups alike.
        if batch > 0 && batch % ROUND_BATCHES == 0 {
            std::mem::replace(&mut setups, start()).into_iter().for_each(Echo::stop);
        }
        let n = BATCH.min(keys - batch * BATCH);
        // Rotations, forwards then backwards: each setup comes first, second, third and last,
        // after and before each neighbour, equally often.
        let mut order: Vec<usize> = (0..4).map(|i| (i + batch) % 4).collect();
        if (batch / 4) % 2 == 1 {
            order.reverse();
        }
        for which in order {
            (0..n).for_each(|_| times[which].push(setups[which].key(gap)));
        }
    }
    setups.into_iter().for_each(Echo::stop);

    let [d, r, p, c] = times.map(Stats::of);
    println!(
        "key-to-echo latency through a pty, {keys} keys each, {} µs between keys, \
         interleaved in batches of {BATCH}",
        gap.as_micros()
    );
    println!("{:<38}{:>10}{:>10}{:>10}", "µs", "median", "p90", "p99");
    println!("{:<38}{:>10.1}{:>10.1}{:>10.1}", "direct (cat -u)", d.median, d.p90, d.p99);
    println!(
        "{:<38}{:>10.1}{:>10.1}{:>10.1}",
        "recorded (tern-relay record cat -u)", r.median, r.p90, r.p99
    );
    println!("{:<38}{:>10.1}{:>10.1}{:>10.1}", "recorded --no-images", p.median, p.p90, p.p99);
    println!(
        "{:<38}{:>10.1}{:>10.1}{:>10.1}",
        "recorded, recording (--cast-bytes)", c.median, c.p90, c.p99
    );
    println!(
        "{:<38}{:>+10.1}{:>+10.1}{:>+10.1}",
        "recorder adds",
        r.median - d.median,
        r.p90 - d.p90,
        r.p99 - d.p99
    );
    println!(
        "{:<38}{:>+10.1}{:>+10.1}{:>+10.1}",
        "recorder --no-images adds",
        p.median - d.median,
        p.p90 - d.p90,
        p.p99 - d.p99
    );
    println!(
        "{:<38}{:>+10.1}{:>+10.1}{:>+10.1}",
        "recording adds (to the recorder)",
        c.median - r.median,
        c.p90 - r.p90,
        c.p99 - r.p99
    );
    if json {
        // For tern-bench's `history` rows: one JSON object on the last line.
        println!(
            "{{\"keys\":{keys},\"directMedianUs\":{:.1},\"recordedMedianUs\":{:.1},\
             \"directP99Us\":{:.1},\"recordedP99Us\":{:.1},\"noImagesMedianUs\":{:.1},\
             \"noImagesP99Us\":{:.1},\"castMedianUs\":{:.1},\"castP99Us\":{:.1}}}",
            d.median, r.median, d.p99, r.p99, p.median, p.p99, c.median, c.p99
        );
    }
}

/// A program echoing keys on a pty of its own: the pty's master and the program.
struct Echo {
    master: File,
    child: Child,
    next: u8,
}

impl Echo {
    /// Starts `command` on a new 80x24 pty, as its session leader (`setsid --ctty`, as
    /// mosh-server starts its child), and waits until it echoes.
    fn start(command: &mut Command) -> Echo {
        let (master, slave) = pty();
        // Raw from the start, as mosh-server's pty is once the program asks for it.
        let mut t = tcgetattr(&slave).expect("tcgetattr");
        t.make_raw();
        tcsetattr(&slave, OptionalActions::Now, &t).expect("tcsetattr");
        let program = command.get_program().to_owned();
        let args: Vec<OsString> = command.get_args().map(ToOwned::to_owned).collect();
        let child = Command::new("setsid")
            .arg("--ctty")
            .arg(program)
            .args(args)
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave))
            .spawn()
            .expect("the echoing program starts");
        let mut echo = Echo { master: File::from(master), child, next: b'a' };
        let mut ready = [0u8; 1];
        loop {
            echo.master.read_exact(&mut ready).expect("the program says it is ready");
            if ready[0] == b'R' {
                break echo;
            }
        }
    }

    /// Pauses `gap`, then times one key from the write to the master until its echo is read.
    fn key(&mut self, gap: Duration) -> Duration {
        std::thread::sleep(gap);
        let key = self.next;
        self.next = if key == b'z' { b'a' } else { key + 1 };
        let mut buf = [0u8; 64];
        let start = Instant::now();
        self.master.write_all(&[key]).expect("write a key");
        loop {
            let n = self.master.read(&mut buf).expect("read the echo");
            assert!(n > 0, "the program exited");
            if buf[..n].contains(&key) {
                return start.elapsed();
            }
        }
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pty pair of 80x24: (master, slave).
fn pty() -> (OwnedFd, OwnedFd) {
    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave: OwnedFd = File::options()
        .read(true)
        .write(true)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
        .expect("the pty's slave")
        .into();
    tcsetwinsize(&master, Winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 })
        .expect("window size");
    (master, slave)
}

/// Median, p90 and p99 in µs.
struct Stats {
    median: f64,
    p90: f64,
    p99: f64,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort();
        let at = |p: usize| {
            let i = (samples.len() * p / 100).min(samples.len() - 1);
            samples[i].as_secs_f64() * 1e6
        };
        Stats { median: at(50), p90: at(90), p99: at(99) }
    }
}
