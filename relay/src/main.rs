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
    // `tern-relay record-follow ...`: on an ssh host, the recorder's files back to the relay
    // (relay/src/history/follow.rs); its stdout is the ssh channel.
    if args.peek().is_some_and(|a| a == "record-follow") {
        args.next();
        return tern_relay::history::follow::main(args);
    }
    // `tern-relay token add|list|revoke`, `tern-relay audit`: the state directory's named
    // tokens and audit trail, with or without a running relay.
    if args.peek().is_some_and(|a| a == "token") {
        args.next();
        return tern_relay::admin::token_main(args);
    }
    if args.peek().is_some_and(|a| a == "audit") {
        args.next();
        return tern_relay::admin::audit_main(args);
    }
    // `tern-relay export SESSION`: a session's recording (--record-sessions).
    if args.peek().is_some_and(|a| a == "export") {
        args.next();
        return tern_relay::admin::export_main(args);
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
    use std::io::IsTerminal;
    let config = Config::parse();
    let qr = config.qr;
    let print_url = config.print_url || std::io::stdout().is_terminal();
    let url_dir = match config.mode() {
        tern_relay::Mode::Spawn => config.state_dir(),
        tern_relay::Mode::Bridge => config.state_dir.clone(),
    };
    let relay = Arc::new(Relay::new(config).await.context("starting the relay")?);
    // The URL carries the token: it goes to a person's terminal (or, asked with --print-url, to
    // whatever stdout is), never into a log or a journal: there it goes to a 0600 file. The first
    // line stays exactly `Open URL` (scripts and tests read it); what helps a person follows.
    let url = relay.page_url();
    if !print_url {
        announce_url_file(&url, url_dir.as_deref())?;
        return serve(relay).await;
    }
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
    serve(relay).await
}

/// Stdout is not a terminal (a journal, a pipe): the URL goes to a file only this user reads,
/// and stdout says where, without the token.
fn announce_url_file(url: &str, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(dir) = dir else {
        let bare = url.split_once('#').map_or(url, |(u, _)| u);
        println!(
            "Open {bare} with the access token (not printed: stdout is not a terminal; pass \
             --print-url to print it, or --state-dir DIR to have the URL written to DIR/url)"
        );
        return Ok(());
    };
    let path = tern_relay::url_file::write(dir, url)
        .with_context(|| format!("writing the URL to {}", dir.display()))?;
    println!(
        "Open the URL in {} (it holds the access token, so it is not printed where stdout is \
         not a terminal; --print-url prints it)",
        path.display()
    );
    Ok(())
}

async fn serve(relay: Arc<Relay>) -> anyhow::Result<()> {
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
