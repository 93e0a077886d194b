//! `linkemu`: run the userspace UDP link emulator between a UDP client and server.
//!
//! Example: 100 ms RTT, 1% loss, 10 Mbit/s down with a 100 ms bottleneck queue, in front of a
//! mosh-server on port 60001:
//!
//! ```text
//! linkemu --listen 127.0.0.1:7000 --target 127.0.0.1:60001 \
//!     --link delay=50ms,loss=1% --down rate=10mbit,queue-delay=100ms
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use tern_tests::linkemu::{
    Dir, DirectionConfig, DirectionStats, LinkConfig, LinkEmulator, parse_duration,
};

/// Userspace UDP link emulator: delay, jitter, loss, rate, bottleneck queue, duplication.
///
/// A direction spec is comma-separated key=value items: delay=25ms, jitter=5ms, reorder,
/// loss=1%, dup=0.1%, rate=10mbit, queue-bytes=64k, queue-delay=100ms (see docs/LINK-EMULATOR.md).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address clients send to.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Server address every flow is forwarded to.
    #[arg(long)]
    target: SocketAddr,
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
    /// Most client flows at once.
    #[arg(long, default_value_t = 64)]
    max_flows: usize,
    /// Print counters this often (e.g. 1s); never when absent.
    #[arg(long, value_parser = parse_duration)]
    stats_every: Option<Duration>,
    /// Stop after this long (e.g. 60s); run until killed when absent.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

fn direction(link: &str, own: &str) -> anyhow::Result<DirectionConfig> {
    let mut config = DirectionConfig::default();
    config.apply_spec(link)?;
    config.apply_spec(own)?;
    Ok(config)
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
    match run(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linkemu: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut config = LinkConfig::new(args.listen, args.target);
    config.up = direction(&args.link, &args.up).context("--link/--up")?;
    config.down = direction(&args.link, &args.down).context("--link/--down")?;
    config.seed = args.seed;
    config.max_flows = args.max_flows;
    let emulator = LinkEmulator::start(config).context("starting the link emulator")?;
    println!(
        "linkemu listening on {} forwarding to {} seed {}",
        emulator.local_addr(),
        args.target,
        emulator.seed()
    );
    println!("up:   {}", emulator.config(Dir::Up));
    println!("down: {}", emulator.config(Dir::Down));
    let started = Instant::now();
    let tick = args.stats_every.unwrap_or(Duration::from_millis(200));
    loop {
        let left = args.duration.map(|d| d.saturating_sub(started.elapsed()));
        if left == Some(Duration::ZERO) {
            break;
        }
        std::thread::sleep(left.map_or(tick, |l| l.min(tick)));
        if args.stats_every.is_some() {
            let s = emulator.stats();
            println!(
                "{} | {} | flows={}",
                show("up", &s.up),
                show("down", &s.down),
                s.flows_opened
            );
        }
    }
    let s = emulator.stats();
    println!("final {} | {} | flows={}", show("up", &s.up), show("down", &s.down), s.flows_opened);
    Ok(())
}
