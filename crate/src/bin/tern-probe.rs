//! `tern-probe`: a native mosh client on Tern's core, for tests, benchmarks and people.
//!
//! `MOSH_KEY=KEY tern-probe HOST PORT [--size 80x24] [--script FILE] [--json] [--stop-and-wait]`
//!
//! Runs the script (one action a line: `type TEXT`, `sleep MS`, `resize COLSxROWS`,
//! `wait-text TEXT [MS]`), then prints the screen as text, or with `--json` an object with `rows`,
//! `cursor`, `title` and the transport counters. Exits non-zero, with a message, on failure.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    probe::main()
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod probe {
    use std::net::{SocketAddr, ToSocketAddrs};
    use std::process::ExitCode;
    use std::time::Duration;

    use tern::native::NativeClient;
    use tern::native::script::{Action, parse_script, parse_size};
    use tern::session::{ClientSession, SessionConfig};
    use tern::terminal::{Complete, screen_text};

    const USAGE: &str = "usage: MOSH_KEY=KEY tern-probe HOST PORT [--size 80x24] [--script FILE] [--json] [--stop-and-wait]";
    /// After the script: wait this long at most for every typed key to be acknowledged, then let
    /// the screen settle for `SETTLE` so the final frame is the server's answer to all of it.
    const DRAIN_LIMIT: Duration = Duration::from_secs(10);
    const SETTLE: Duration = Duration::from_millis(300);

    struct Options {
        server: SocketAddr,
        key: String,
        size: (u16, u16),
        script: Option<String>,
        json: bool,
        stop_and_wait: bool,
    }

    pub fn main() -> ExitCode {
        match parse_args().and_then(run) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("tern-probe: {message}");
                ExitCode::FAILURE
            }
        }
    }

    fn parse_args() -> Result<Options, String> {
        let mut args = std::env::args().skip(1);
        let mut positional = Vec::new();
        let mut size = (80, 24);
        let mut script = None;
        let (mut json, mut stop_and_wait) = (false, false);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--size" => size = parse_size(&args.next().ok_or("--size needs COLSxROWS")?)?,
                "--script" => {
                    let path = args.next().ok_or("--script needs a file")?;
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("cannot read script {path}: {e}"))?;
                    script = Some(text);
                }
                "--json" => json = true,
                "--stop-and-wait" => stop_and_wait = true,
                "-h" | "--help" => return Err(USAGE.into()),
                other if other.starts_with("--") => {
                    return Err(format!("unknown option {other}\n{USAGE}"));
                }
                _ => positional.push(arg),
            }
        }
        let [host, port] = <[String; 2]>::try_from(positional).map_err(|_| USAGE.to_owned())?;
        let port: u16 = port.parse().map_err(|_| format!("bad port {port:?}"))?;
        let server = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host} has no address"))?;
        let key = std::env::var("MOSH_KEY").map_err(|_| format!("MOSH_KEY is not set\n{USAGE}"))?;
        Ok(Options { server, key, size, script, json, stop_and_wait })
    }

    fn run(options: Options) -> Result<(), String> {
        let actions =
            parse_script(options.script.as_deref().unwrap_or("")).map_err(|e| e.to_string())?;
        let key = options.key.parse().map_err(|e| format!("MOSH_KEY: {e}"))?;
        let mut config = SessionConfig::new(key, options.size.0, options.size.1);
        config.stop_and_wait = options.stop_and_wait;
        config.seed = u64::from(std::process::id());
        let mut client: NativeClient<Complete> =
            NativeClient::connect(options.server, config).map_err(|e| format!("udp: {e}"))?;
        let io = |e: std::io::Error| format!("udp: {e}");
        for action in actions {
            match action {
                Action::Type(bytes) => client.type_bytes(&bytes).map_err(io)?,
                Action::Sleep(duration) => client.run_for(duration).map_err(io)?,
                Action::Resize { cols, rows } => client.resize(cols, rows).map_err(io)?,
                Action::WaitText { text, timeout } => {
                    let seen =
                        client.run_until(timeout, |s| screen_contains(s, &text)).map_err(io)?;
                    if !seen {
                        return Err(format!(
                            "wait-text {text:?}: not on the screen after {} ms{}; screen:\n{}",
                            timeout.as_millis(),
                            closed_note(&client),
                            screen_text(client.session().server_state().framebuffer()).trimmed()
                        ));
                    }
                }
            }
            if let Some(reason) = client.closed() {
                return Err(format!("the session ended during the script: {reason:?}"));
            }
        }
        client
            .run_until(DRAIN_LIMIT, |s| s.unacked_input() == 0 && s.has_heard_server())
            .map_err(io)?;
        client.run_for(SETTLE).map_err(io)?;
        if !client.session().has_heard_server() {
            return Err(format!(
                "nothing received from the server at {} (wrong key or port?){}",
                options.server,
                client
                    .session()
                    .last_error()
                    .map(|e| format!("; last error: {e}"))
                    .unwrap_or_default()
            ));
        }
        print_result(client.session(), options.json);
        Ok(())
    }

    fn screen_contains(session: &ClientSession<Complete>, text: &str) -> bool {
        let screen = screen_text(session.server_state().framebuffer());
        screen.rows.iter().any(|row| row.contains(text))
    }

    fn closed_note(client: &NativeClient<Complete>) -> String {
        if let Some(reason) = client.closed() {
            return format!(" (session ended: {reason:?})");
        }
        if !client.session().has_heard_server() {
            return " (nothing received from the server: wrong key or port?)".into();
        }
        String::new()
    }

    fn print_result(session: &ClientSession<Complete>, json: bool) {
        let framebuffer = session.server_state().framebuffer();
        let screen = screen_text(framebuffer);
        if !json {
            println!("{}", screen.trimmed());
            return;
        }
        let rows: Vec<String> = screen.rows.iter().map(|row| json_string(row)).collect();
        let counters = session.counters();
        println!(
            "{{\"rows\":[{}],\"cursor\":{{\"row\":{},\"col\":{}}},\"title\":{},\"counters\":{{{}}},\"srtt_ms\":{:.1},\"send_interval_ms\":{}}}",
            rows.join(","),
            screen.cursor.row,
            screen.cursor.col,
            json_string(framebuffer.title()),
            counter_fields(counters),
            session.srtt().as_secs_f64() * 1000.0,
            session.send_interval().as_millis(),
        );
    }

    fn counter_fields(c: &tern::transport::Counters) -> String {
        let fields = [
            ("datagrams_in", c.datagrams_in),
            ("datagrams_out", c.datagrams_out),
            ("bytes_in", c.bytes_in),
            ("bytes_out", c.bytes_out),
            ("auth_failures", c.auth_failures),
            ("malformed", c.malformed),
            ("retransmits", c.retransmits),
            ("applied", c.applied),
            ("applied_to_older_base", c.applied_to_older_base),
            ("duplicates", c.duplicates),
            ("parked", c.parked),
            ("stale", c.stale),
            ("dropped_unknown_base", c.dropped_unknown_base),
            ("acks_on_unknown_base", c.acks_on_unknown_base),
            ("refused_older_base", c.refused_older_base),
            ("quenched", c.quenched),
            ("apply_failures", c.apply_failures),
        ];
        fields
            .iter()
            .map(|(name, value)| format!("\"{name}\":{value}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A JSON string literal (quotes, backslashes and control characters escaped).
    fn json_string(text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 2);
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}
