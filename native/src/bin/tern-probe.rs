//! `tern-probe`: a native mosh client on Tern's core, for tests, benchmarks and people.
//!
//! `MOSH_KEY=KEY tern-probe HOST PORT [--size 80x24] [--script FILE] [--json] [--stop-and-wait]
//!  [--predict never|adaptive|always|experimental] [--predict-overwrite] [--timeline]`
//!
//! Runs the script (one action a line: `type TEXT`, `sleep MS`, `resize COLSxROWS`,
//! `wait-text TEXT [MS]`), then prints the screen as text, or with `--json` an object with `rows`,
//! `cursor`, `title`, the transport counters, the prediction mode and counters, the display frame
//! (`display_rows`) and, with `--timeline`, every key and screen change with its time. Exits
//! non-zero, with a message, on failure.

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

    use tern::predict::{PredictConfig, PredictMode};
    use tern::terminal::ScreenText;
    use tern_native::probe::{ProbeOptions, ProbeResult, Snapshot, Timeline, run_probe};
    use tern_native::script::{parse_script, parse_size};

    const USAGE: &str = "usage: MOSH_KEY=KEY tern-probe HOST PORT [--size 80x24] [--script FILE] [--json] [--stop-and-wait] [--predict never|adaptive|always|experimental] [--predict-overwrite] [--timeline]";

    struct Options {
        server: SocketAddr,
        key: String,
        size: (u16, u16),
        script: Option<String>,
        json: bool,
        stop_and_wait: bool,
        predict: PredictConfig,
        timeline: bool,
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
        let (mut json, mut stop_and_wait, mut timeline) = (false, false, false);
        // mosh-client's default: adaptive.
        let mut predict = PredictConfig::default();
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
                "--predict" => {
                    let mode = args.next().ok_or("--predict needs a mode")?;
                    predict.mode = PredictMode::parse(&mode).ok_or_else(|| {
                        format!(
                            "unknown prediction mode {mode:?} (never, adaptive, always, experimental)"
                        )
                    })?;
                }
                "--predict-overwrite" => predict.overwrite = true,
                "--timeline" => timeline = true,
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
        if timeline && !json {
            return Err(format!("--timeline needs --json\n{USAGE}"));
        }
        Ok(Options { server, key, size, script, json, stop_and_wait, predict, timeline })
    }

    fn run(options: Options) -> Result<(), String> {
        let actions =
            parse_script(options.script.as_deref().unwrap_or("")).map_err(|e| e.to_string())?;
        let key = options.key.parse().map_err(|e| format!("MOSH_KEY: {e}"))?;
        let probe = ProbeOptions {
            server: options.server,
            key,
            cols: options.size.0,
            rows: options.size.1,
            stop_and_wait: options.stop_and_wait,
            seed: u64::from(std::process::id()),
            predict: options.predict,
            timeline: options.timeline,
            predict_before_36: false,
        };
        let result = run_probe(&probe, &actions)?;
        print_result(&result, options.json);
        Ok(())
    }

    fn print_result(result: &ProbeResult, json: bool) {
        let screen = &result.screen;
        if !json {
            println!("{}", screen.trimmed());
            return;
        }
        let timeline = result.timeline.as_ref().map(timeline_json).unwrap_or_default();
        println!(
            "{{\"rows\":{},\"cursor\":{},\"title\":{},\"counters\":{{{}}},\"srtt_ms\":{:.1},\"send_interval_ms\":{},\"predict\":{},\"display_rows\":{},\"display_cursor\":{}{timeline}}}",
            rows_json(screen),
            cursor_json(screen),
            json_string(&result.title),
            counter_fields(&result.counters),
            result.srtt.as_secs_f64() * 1000.0,
            result.send_interval.as_millis(),
            predict_json(result),
            rows_json(&result.display),
            cursor_json(&result.display),
        );
    }

    fn rows_json(screen: &ScreenText) -> String {
        let rows: Vec<String> = screen.rows.iter().map(|row| json_string(row)).collect();
        format!("[{}]", rows.join(","))
    }

    fn cursor_json(screen: &ScreenText) -> String {
        format!("{{\"row\":{},\"col\":{}}}", screen.cursor.row, screen.cursor.col)
    }

    fn predict_json(result: &ProbeResult) -> String {
        let c = &result.predict_counters;
        format!(
            "{{\"mode\":{},\"overwrite\":{},\"made\":{},\"drawn\":{},\"confirmed\":{},\"wrong_drawn\":{},\"epochs_killed\":{},\"resets\":{},\"prompt_confirmed\":{}}}",
            json_string(result.predict.mode.as_str()),
            result.predict.overwrite,
            c.made,
            c.drawn,
            c.confirmed,
            c.wrong_drawn,
            c.epochs_killed,
            c.resets,
            c.prompt_confirmed,
        )
    }

    /// `,"timeline":{...}`: times in microseconds on the probe's monotonic clock.
    fn timeline_json(timeline: &Timeline) -> String {
        let keys: Vec<String> = timeline
            .keys
            .iter()
            .map(|k| {
                let bytes: Vec<String> = k.bytes.iter().map(u8::to_string).collect();
                format!("{{\"t_us\":{},\"bytes\":[{}]}}", k.at.as_micros(), bytes.join(","))
            })
            .collect();
        let snapshots = |list: &[Snapshot]| {
            let items: Vec<String> = list
                .iter()
                .map(|s| {
                    format!(
                        "{{\"t_us\":{},\"rows\":{},\"cursor\":{}}}",
                        s.at.as_micros(),
                        rows_json(&s.screen),
                        cursor_json(&s.screen)
                    )
                })
                .collect();
            format!("[{}]", items.join(","))
        };
        format!(
            ",\"timeline\":{{\"keys\":[{}],\"display\":{},\"server\":{}}}",
            keys.join(","),
            snapshots(&timeline.display),
            snapshots(&timeline.server)
        )
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
            ("lost_base", c.lost_base),
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
