//! `tern-relay token add|list|revoke`, `tern-relay audit` and `tern-relay export`: they work on the state directory
//! only ([`crate::tokens`], [`crate::audit`]), so they run with or without a relay; a running
//! relay sees a token change within [`crate::tokens::WATCH_INTERVAL`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::tokens::{add, last_used, read, revoke, unix_now};

pub use crate::tokens::parse_duration;

#[derive(Parser, Debug)]
#[command(name = "tern-relay token", about = "Named access tokens: add, list, revoke")]
pub struct TokenArgs {
    /// The relay's state directory (as the relay's --state-dir).
    #[arg(long, env = "TERN_RELAY_STATE_DIR", global = true)]
    pub state_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Makes a new random token and prints it once, with the URL to open (nothing keeps it:
    /// only its verifier is stored).
    Add {
        /// A name for the token (a device, a person): shown in the list, logs and audit.
        name: String,
        /// Its links may read the screen but not type, resize, paste, seed, answer offers or
        /// download.
        #[arg(long)]
        read_only: bool,
        /// It stops working after this long: 90s, 30m, 12h, 7d, 2w.
        #[arg(long, value_parser = parse_duration)]
        expires: Option<Duration>,
        /// The relay's page address to print with the token (default: the URL the relay
        /// wrote to the state directory, else http://127.0.0.1:7480/).
        #[arg(long)]
        url: Option<String>,
    },
    /// Lists the named tokens: name, kind, created, last used, expiry.
    List,
    /// Removes a token: a running relay refuses it within a second and closes its links.
    Revoke { name: String },
}

#[derive(Parser, Debug)]
#[command(name = "tern-relay audit", about = "Prints the audit trail")]
pub struct AuditArgs {
    /// The relay's state directory (as the relay's --state-dir).
    #[arg(long, env = "TERN_RELAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Only events since this long ago (30m, 2h, 7d) or this unix time in seconds.
    #[arg(long)]
    pub since: Option<String>,
}

/// The state directory as the relay finds it (`--state-dir`, XDG, HOME).
pub fn state_dir(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let mut c = <crate::config::Config as clap::Parser>::parse_from(["tern-relay"]);
    c.state_dir = flag.or(c.state_dir);
    c.state_dir().ok_or_else(|| anyhow::anyhow!("no state directory: pass --state-dir"))
}

pub fn when(t: u64) -> String {
    let Ok(at) = time::OffsetDateTime::from_unix_timestamp(t as i64) else {
        return t.to_string();
    };
    format!(
        "{}-{:02}-{:02} {:02}:{:02}Z",
        at.year(),
        at.month() as u8,
        at.day(),
        at.hour(),
        at.minute()
    )
}

/// The page URL to print with a new token: the relay's own URL from the state directory
/// with its token replaced.
fn page_url(dir: &Path, flag: Option<String>) -> String {
    let base = flag
        .or_else(|| {
            std::fs::read_to_string(dir.join("url"))
                .ok()
                .and_then(|u| u.trim().split('#').next().map(str::to_string))
        })
        .unwrap_or_else(|| "http://127.0.0.1:7480/".into());
    base.split('#').next().unwrap_or(&base).to_string()
}

pub fn token_main(args: impl Iterator<Item = std::ffi::OsString>) -> std::process::ExitCode {
    let args = TokenArgs::parse_from(std::iter::once("tern-relay token".into()).chain(args));
    match run_token(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-relay token: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_token(args: TokenArgs) -> anyhow::Result<()> {
    let dir = state_dir(args.state_dir)?;
    let audit = crate::audit::Audit::open(Some(&dir));
    match args.command {
        TokenCommand::Add { name, read_only, expires, url } => {
            let token = add(&dir, &name, read_only, expires)?;
            let kind = if read_only { "read-only" } else { "read-write" };
            audit.event("token_added", &crate::audit::Fields::new().who(&name).kind(kind));
            println!("Token {name} ({kind}), shown this once: {token}");
            println!("Open {}#token={token}", page_url(&dir, url));
        }
        TokenCommand::List => {
            let used = last_used(&dir);
            let now = unix_now();
            println!("{:<20} {:<10} {:<18} {:<18} EXPIRES", "NAME", "KIND", "CREATED", "LAST USED");
            for e in read(&dir)? {
                let kind = if e.read_only { "read-only" } else { "read-write" };
                let last = used.get(&e.id).map_or("never".into(), |t| when(*t));
                let expires = match e.expires {
                    None => "never".into(),
                    Some(t) if t <= now => format!("{} (expired)", when(t)),
                    Some(t) => when(t),
                };
                println!(
                    "{:<20} {:<10} {:<18} {:<18} {expires}",
                    e.name,
                    kind,
                    when(e.created),
                    last
                );
            }
        }
        TokenCommand::Revoke { name } => {
            let gone = revoke(&dir, &name)?;
            audit.event("token_revoked", &crate::audit::Fields::new().who(&gone.name));
            println!(
                "Revoked {name}: a running relay refuses it and closes its links within a second"
            );
        }
    }
    Ok(())
}

/// `tern-relay audit [--since 30m|UNIX]`.
pub fn audit_main(args: impl Iterator<Item = std::ffi::OsString>) -> std::process::ExitCode {
    use clap::Parser as _;
    let args = AuditArgs::parse_from(std::iter::once("tern-relay audit".into()).chain(args));
    let since = match args.since.as_deref().map(parse_since).transpose() {
        Ok(s) => s.unwrap_or(0),
        Err(e) => {
            eprintln!("tern-relay audit: --since {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match state_dir(args.state_dir) {
        Ok(dir) => {
            for line in crate::audit::read_since(&dir, since) {
                println!("{line}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tern-relay audit: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "tern-relay export",
    about = "Prints a session's recording (asciicast v2; the relay's --record-sessions)"
)]
pub struct ExportArgs {
    /// The relay's state directory (as the relay's --state-dir).
    #[arg(long, env = "TERN_RELAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// The session's id (as the page and `tern-relay audit` show it).
    pub session: String,
}

/// `tern-relay export SESSION > s.cast`.
pub fn export_main(args: impl Iterator<Item = std::ffi::OsString>) -> std::process::ExitCode {
    use clap::Parser as _;
    let args = ExportArgs::parse_from(std::iter::once("tern-relay export".into()).chain(args));
    match export(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-relay export: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn export(args: ExportArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let id = &args.session;
    if !crate::ids::valid_id(id) {
        anyhow::bail!("{id:?} is not a session id (hex digits, as the session list shows)");
    }
    let sessions = state_dir(args.state_dir)?.join("sessions");
    let path = crate::history::cast::path_of(&sessions, id);
    let mut file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if sessions.join(format!("{id}.json")).exists() {
                anyhow::bail!(
                    "session {id} was not recorded (the relay records sessions started with \
                     --record-sessions)"
                );
            }
            anyhow::bail!(
                "no session {id} in {} (ended sessions' recordings are removed with them)",
                sessions.display()
            );
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = std::io::stdout().lock();
    std::io::copy(&mut file, &mut out).context("writing the recording")?;
    Ok(())
}

/// A duration back from now (`30m`) or a unix time in seconds.
fn parse_since(text: &str) -> Result<u64, String> {
    if let Ok(t) = text.parse::<u64>() {
        return Ok(t);
    }
    let d = parse_duration(text)?;
    Ok(unix_now().saturating_sub(d.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        assert!(parse_duration("7").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("h").is_err());
    }

    #[test]
    fn since_is_a_time_or_a_duration_back() {
        assert_eq!(parse_since("1700000000").unwrap(), 1_700_000_000);
        assert!(parse_since("30m").unwrap() < unix_now());
        assert!(parse_since("nope").is_err());
    }
}
