//! `tern`: the command a spawned session's shell has (tern-relay under another name) to send
//! files to the browser and open URLs there. It talks to its session's relay over the socket
//! named by `TERN_SOCKET`, waits for the page's answer, and says what happened.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::command::{Reply, Request, SESSION_ENV, SOCKET_ENV, line};

const USAGE: &str = "\
usage: tern send FILE...   download FILE(s) in the browser of this Tern session
       tern open URL       open URL (http or https) in a new tab, once the person allows it
       tern show FILE... [--cols N] [--rows N]
                           show PNG, JPEG, GIF or WebP pictures inline in the terminal
       tern share [--expires 1h] [--allow-history]
                           print a read-only link that shows this session live
       tern share --end    end every share of this session (its viewers are closed)";
/// How long `tern` tries to reach a relay that went away while it waited (a restart).
const RECONNECT_FOR: Duration = Duration::from_secs(60);

/// `tern ARGS`: exits 0 when everything was saved or opened.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<String> = args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect();
    // Needs no relay: the recorder carries the picture (docs/IMAGES.md).
    if args.first().map(String::as_str) == Some("show") {
        return super::show::main(&args[1..]);
    }
    let (Some(socket), Some(session)) =
        (std::env::var_os(SOCKET_ENV), std::env::var(SESSION_ENV).ok())
    else {
        eprintln!(
            "tern: this shell is not in a Tern session ({SOCKET_ENV} is not set): `tern send` and \
             `tern open` work in shells that tern-relay started (spawn mode)"
        );
        return ExitCode::from(2);
    };
    let socket = Path::new(&socket);
    match args.first().map(String::as_str) {
        Some("send") if args.len() > 1 => {
            let mut ok = true;
            for file in &args[1..] {
                ok &= send(socket, &session, file);
            }
            if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Some("open") if args.len() == 2 => {
            let request = Request::Open { session: session.clone(), url: args[1].clone() };
            if run(socket, &session, request, &args[1]) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some("share") => share(socket, &session, &args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn send(socket: &Path, session: &str, file: &str) -> bool {
    let path = match std::fs::canonicalize(file) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("tern: {file}: {e}");
            return false;
        }
    };
    let request = Request::Send { session: session.into(), path: path.to_string_lossy().into() };
    run(socket, session, request, file)
}

/// `tern share [--expires D] [--allow-history]` or `tern share --end`: prints the viewer's URL
/// (or how many shares ended).
fn share(socket: &Path, session: &str, args: &[String]) -> ExitCode {
    let mut expires = None;
    let mut allow_history = false;
    let mut end = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--allow-history" => allow_history = true,
            "--end" => end = true,
            "--expires" => match it.next().map(|d| crate::tokens::parse_duration(d)) {
                Some(Ok(d)) => expires = Some(d.as_secs()),
                Some(Err(e)) => {
                    eprintln!("tern share: --expires: {e}");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("tern share: --expires needs a duration (30m, 1h, 2d)");
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let request = if end {
        Request::Unshare { session: session.into() }
    } else {
        Request::Share { session: session.into(), expires, allow_history }
    };
    let mut offer = None;
    match exchange(socket, &request, &mut offer) {
        Exchange::Answered(Reply::Shared { url, .. }) => {
            let left = expires.unwrap_or(crate::share::DEFAULT_EXPIRY.as_secs());
            let history = if allow_history { ", with its history" } else { "" };
            eprintln!(
                "tern: this session is shared read-only for {}{history}; anyone with the link \
                 can watch it (`tern share --end` ends it):",
                human(left)
            );
            println!("{url}");
            ExitCode::SUCCESS
        }
        Exchange::Answered(Reply::Unshared { count }) => {
            eprintln!("tern: {count} share(s) ended; their viewers are closed");
            ExitCode::SUCCESS
        }
        Exchange::Answered(_) => ExitCode::FAILURE,
        Exchange::Refused(message) => {
            eprintln!("tern share: {message}");
            ExitCode::FAILURE
        }
        Exchange::Lost(why) => {
            eprintln!("tern: cannot reach the relay at {}: {why}", socket.display());
            ExitCode::FAILURE
        }
    }
}

/// Seconds as the largest whole unit ("1 h", "30 min", "45 s").
fn human(secs: u64) -> String {
    match secs {
        s if s >= 86400 && s % 86400 == 0 => format!("{} d", s / 86400),
        s if s >= 3600 && s % 3600 == 0 => format!("{} h", s / 3600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// Sends one request and waits for its answer, reconnecting if the relay restarts meanwhile.
fn run(socket: &Path, session: &str, request: Request, what: &str) -> bool {
    let mut request = request;
    let mut offer: Option<String> = None;
    let mut lost_at: Option<Instant> = None;
    loop {
        match exchange(socket, &request, &mut offer) {
            Exchange::Answered(reply) => return said(what, reply),
            Exchange::Refused(message) => {
                eprintln!("tern: {what}: {message}");
                return false;
            }
            Exchange::Lost(why) => {
                let Some(id) = &offer else {
                    eprintln!("tern: cannot reach the relay at {}: {why}", socket.display());
                    return false;
                };
                let since = *lost_at.get_or_insert_with(|| {
                    eprintln!("tern: the relay went away; waiting for it to come back…");
                    Instant::now()
                });
                if since.elapsed() > RECONNECT_FOR {
                    eprintln!(
                        "tern: the relay did not come back within {} s",
                        RECONNECT_FOR.as_secs()
                    );
                    return false;
                }
                std::thread::sleep(Duration::from_millis(300));
                request = Request::Wait { session: session.into(), offer: id.clone() };
            }
        }
    }
}

enum Exchange {
    Answered(Reply),
    Refused(String),
    Lost(String),
}

fn exchange(socket: &Path, request: &Request, offer: &mut Option<String>) -> Exchange {
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => return Exchange::Lost(e.to_string()),
    };
    if let Err(e) = stream.write_all(&line(request)) {
        return Exchange::Lost(e.to_string());
    }
    let mut lines = BufReader::new(stream);
    let mut buf = String::new();
    loop {
        buf.clear();
        match lines.read_line(&mut buf) {
            Ok(0) => return Exchange::Lost("the connection closed".into()),
            Err(e) => return Exchange::Lost(e.to_string()),
            Ok(_) => {}
        }
        match serde_json::from_str::<Reply>(&buf) {
            Ok(Reply::Offered { offer: id, name, size }) => {
                if size > 0 || matches!(request, Request::Send { .. }) {
                    eprintln!("tern: offered {name} ({}) to the browser…", tern::paste::size(size));
                } else {
                    eprintln!(
                        "tern: asked the browser to open {name}; waiting for the person to allow it…"
                    );
                }
                *offer = Some(id);
            }
            Ok(Reply::Error { message }) => return Exchange::Refused(message),
            Ok(answer @ (Reply::Answer { .. } | Reply::Shared { .. } | Reply::Unshared { .. })) => {
                return Exchange::Answered(answer);
            }
            Err(e) => {
                return Exchange::Refused(format!("the relay's answer could not be read: {e}"));
            }
        }
    }
}

/// Says what the page answered; true when it was saved or opened.
fn said(what: &str, reply: Reply) -> bool {
    let Reply::Answer { answer, message } = reply else { return false };
    match answer.as_str() {
        "saved" => {
            eprintln!("tern: {what}: downloaded by the browser, SHA-256 checked");
            true
        }
        "opened" => {
            eprintln!("tern: {what}: opened in the browser");
            true
        }
        "dismissed" => {
            eprintln!("tern: {what}: the person declined");
            false
        }
        _ => {
            eprintln!("tern: {what}: failed: {}", message.unwrap_or_else(|| answer.clone()));
            false
        }
    }
}
