//! `linkemu`: run the link emulator, either as a UDP proxy between a UDP client and server (the
//! default mode) or as a TUN link for any IP traffic inside a network namespace (`linkemu tun`).
//!
//! Example: 100 ms RTT, 1% loss, 10 Mbit/s down with a 100 ms bottleneck queue, in front of a
//! mosh-server on port 60001:
//!
//! ```text
//! linkemu --listen 127.0.0.1:7000 --target 127.0.0.1:60001 \
//!     --link delay=50ms,loss=1% --down rate=10mbit,queue-delay=100ms
//! ```
//!
//! The same link for TCP and UDP alike, in a namespace of its own; clients connect to 10.77.0.2 to
//! reach servers listening in the namespace:
//!
//! ```text
//! unshare -n linkemu tun --net 10.77.0.0/24 --link delay=50ms,loss=1%
//! ```

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use tern_tests::linkemu::tun::{TunConfig, TunLink, TunNet};
use tern_tests::linkemu::{
    Dir, DirectionConfig, DirectionStats, LinkConfig, LinkEmulator, parse_duration,
};

/// Link emulator: delay, jitter, loss, rate, bottleneck queue, duplication.
///
/// A direction spec is comma-separated key=value items: delay=25ms, jitter=5ms, reorder,
/// loss=1%, dup=0.1%, rate=10mbit, queue-bytes=64k, queue-delay=100ms (see docs/LINK-EMULATOR.md).
/// Without a subcommand it is a UDP proxy from --listen to --target.
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    udp: UdpArgs,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// A TUN link for any IPv4 traffic (TCP too), run inside a fresh network namespace
    /// (`unshare -n`). Clients connect to the net's .2 and reach servers listening on the same
    /// port in the namespace (their address is .1); servers see clients coming from .3. Prints
    /// `linkemu tun ready far <address> ...` once traffic can flow.
    Tun(TunArgs),
}

#[derive(Debug, clap::Args)]
struct UdpArgs {
    /// Address clients send to.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Server address every flow is forwarded to.
    #[arg(long, required = true)]
    target: Option<SocketAddr>,
    /// Most client flows at once.
    #[arg(long, default_value_t = 64)]
    max_flows: usize,
    #[command(flatten)]
    link: LinkArgs,
}

#[derive(Debug, clap::Args)]
struct TunArgs {
    /// Name of the TUN device to create.
    #[arg(long, default_value = "tern0")]
    dev: String,
    /// Subnet of the device: .1 is the device (every local socket), .2 the far side, .3 the mirror.
    #[arg(long, default_value_t = TunNet::default())]
    net: TunNet,
    /// Exit when standard input reaches its end, so the link goes away with a parent that holds
    /// the other end of a pipe (do not combine with a closed or /dev/null stdin). Lines read
    /// meanwhile change the link from the next packet on: `link SPEC`, `up SPEC` or `down SPEC`,
    /// applied on top of the direction's current spec (`link loss=100%`, later `link loss=0`);
    /// each is answered `linkemu set up: ... down: ...` (or `linkemu bad line: ...`).
    #[arg(long)]
    exit_on_stdin_eof: bool,
    #[command(flatten)]
    link: LinkArgs,
}

/// What both modes share: the link and how long to run.
#[derive(Debug, clap::Args)]
struct LinkArgs {
    /// Spec applied to both directions.
    #[arg(long, default_value = "")]
    link: String,
    /// Spec for client to server, applied on top of --link.
    #[arg(long, default_value = "")]
    up: String,
    /// Spec for server to client, applied on top of --link.
    #[arg(long, default_value = "")]
    down: String,
    /// Seed of the random draws (printed when chosen from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Print counters this often (e.g. 1s); never when absent.
    #[arg(long, value_parser = parse_duration)]
    stats_every: Option<Duration>,
    /// Stop after this long (e.g. 60s); run until killed when absent.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

impl LinkArgs {
    fn directions(&self) -> anyhow::Result<(DirectionConfig, DirectionConfig)> {
        let up = direction(&self.link, &self.up).context("--link/--up")?;
        let down = direction(&self.link, &self.down).context("--link/--down")?;
        Ok((up, down))
    }

    /// Prints counters every --stats-every until --duration has passed or `stop` is set.
    fn run(&self, stop: &AtomicBool, stats: impl Fn() -> String) {
        let started = Instant::now();
        let tick = self.stats_every.unwrap_or(Duration::from_millis(200));
        while !stop.load(Ordering::Relaxed) {
            let left = self.duration.map(|d| d.saturating_sub(started.elapsed()));
            if left == Some(Duration::ZERO) {
                break;
            }
            std::thread::sleep(left.map_or(tick, |l| l.min(tick)));
            if self.stats_every.is_some() {
                println!("{}", stats());
            }
        }
        println!("final {}", stats());
    }
}

fn direction(link: &str, own: &str) -> anyhow::Result<DirectionConfig> {
    let mut config = DirectionConfig::default();
    config.apply_spec(link)?;
    config.apply_spec(own)?;
    Ok(config)
}

/// One control line from standard input: `link|up|down SPEC`, on top of the current spec.
fn change_link(link: &TunLink, line: &str) -> anyhow::Result<()> {
    let (which, spec) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
    let dirs: &[Dir] = match which {
        "link" => &[Dir::Up, Dir::Down],
        "up" => &[Dir::Up],
        "down" => &[Dir::Down],
        other => anyhow::bail!("{other:?}: link, up or down"),
    };
    for &dir in dirs {
        let mut config = link.config(dir);
        config.apply_spec(spec)?;
        link.set_config(dir, config)?;
    }
    Ok(())
}

fn show(name: &str, s: &DirectionStats) -> String {
    format!(
        "{name}: received={} forwarded={} bytes={} lost={} queue_drops={} dups={} send_errors={}",
        s.received,
        s.forwarded,
        s.forwarded_bytes,
        s.dropped_loss,
        s.dropped_queue,
        s.duplicated,
        s.send_errors
    )
}

fn main() -> std::process::ExitCode {
    // Print `{e:#}` rather than returning the error: the environment sets RUST_BACKTRACE=1 and
    // anyhow would print a backtrace for a mistyped option.
    let args = Args::parse();
    let result = match args.mode {
        Some(Mode::Tun(tun)) => run_tun(tun),
        None => run_udp(args.udp),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linkemu: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_udp(args: UdpArgs) -> anyhow::Result<()> {
    let target = args.target.context("--target is required")?;
    let mut config = LinkConfig::new(args.listen, target);
    (config.up, config.down) = args.link.directions()?;
    config.seed = args.link.seed;
    config.max_flows = args.max_flows;
    let emulator = LinkEmulator::start(config).context("starting the link emulator")?;
    println!(
        "linkemu listening on {} forwarding to {} seed {}",
        emulator.local_addr(),
        target,
        emulator.seed()
    );
    println!("up:   {}", emulator.config(Dir::Up));
    println!("down: {}", emulator.config(Dir::Down));
    args.link.run(&AtomicBool::new(false), || {
        let s = emulator.stats();
        format!("{} | {} | flows={}", show("up", &s.up), show("down", &s.down), s.flows_opened)
    });
    Ok(())
}

fn run_tun(args: TunArgs) -> anyhow::Result<()> {
    let (up, down) = args.link.directions()?;
    let config = TunConfig { device: args.dev, net: args.net, up, down, seed: args.link.seed };
    let link = Arc::new(TunLink::start(config).context("starting the TUN link")?);
    let stop = Arc::new(AtomicBool::new(false));
    if args.exit_on_stdin_eof {
        let stop = Arc::clone(&stop);
        let link = Arc::clone(&link);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match change_link(&link, &line) {
                    Ok(()) => println!(
                        "linkemu set up: {} down: {}",
                        link.config(Dir::Up),
                        link.config(Dir::Down)
                    ),
                    Err(e) => println!("linkemu bad line: {line:?}: {e:#}"),
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
    let r = link.reflection();
    println!("up:   {}", link.config(Dir::Up));
    println!("down: {}", link.config(Dir::Down));
    // The last line of start-up: callers wait for it before connecting.
    println!(
        "linkemu tun ready far {} host {} mirror {} dev {} net {} seed {}",
        r.far,
        r.host,
        r.mirror,
        link.device_name(),
        args.net,
        link.seed()
    );
    args.link.run(&stop, || {
        let s = link.stats();
        format!("{} | {} | unreflected={}", show("up", &s.up), show("down", &s.down), s.unreflected)
    });
    Ok(())
}
