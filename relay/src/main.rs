//! The tern-relay binary: parse the configuration, bind, print the URL, serve until a signal.

use anyhow::Context;
use clap::Parser;
use std::sync::Arc;
use tern_relay::{Config, Relay, logging};

fn main() -> std::process::ExitCode {
    // `tern-relay record ...`: the pty recorder the relay puts between mosh-server and the shell
    // (relay/src/history/record.rs). No runtime, no log: its stdout is the shell's terminal.
    let mut all = std::env::args_os();
    // `tern send FILE`, `tern open URL`: the command a session's shell has, a link to this
    // executable under the name `tern` (relay/src/send/).
    let invoked_as = all.next().map(std::path::PathBuf::from);
    if invoked_as.as_deref().and_then(std::path::Path::file_name).is_some_and(|n| n == "tern") {
        return tern_relay::send::cli::main(all);
    }
    let mut args = all.peekable();
    if args.peek().is_some_and(|a| a == "record") {
        args.next();
        return tern_relay::history::record::main(args);
    }
    relay_main()
}

#[tokio::main]
async fn relay_main() -> std::process::ExitCode {
    logging::init();
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the whole cause chain on one line, no backtrace noise.
            eprintln!("tern-relay: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let config = Config::parse();
    let qr = config.qr;
    let relay = Arc::new(Relay::new(config).await.context("starting the relay")?);
    // The URL carries the token: it goes to stdout for the user, never into the log. The first
    // line stays exactly `Open URL` (scripts and tests read it); what helps a person follows.
    let url = relay.page_url();
    println!("Open {url}");
    if let Some(fingerprint) = relay.tls_fingerprint() {
        let lasts = match relay.tls_fingerprint_kept() {
            true => "kept in the state directory across restarts",
            false => "new at each start: bridge mode without --state-dir",
        };
        println!(
            "Certificate SHA-256 {fingerprint}\n  (the browser warns about this self-signed \
             certificate: accept it only if the fingerprint it shows is this one; {lasts})"
        );
    }
    if qr || relay.page_url_is_remote() {
        match tern_relay::qr::render(&url) {
            Ok(code) => print!("\n{code}"),
            Err(e) => eprintln!("tern-relay: cannot draw the URL as a QR code: {e}"),
        }
    }
    let stop = relay.shutdown_handle();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received; shutting down (mosh-servers keep running)");
        stop.cancel();
    });
    relay.run().await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) =
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        // Without signal handlers, fall back to Ctrl-C only.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
