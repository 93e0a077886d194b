//! The `tern-probe` binary as a person runs it: arguments, exit status, text and JSON output.

use std::process::{Command, Output};

use tern_native::{MoshServer, MoshServerOptions};

fn probe(args: &[&str], key: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tern-probe"));
    command.args(args).env_remove("MOSH_KEY");
    if let Some(key) = key {
        command.env("MOSH_KEY", key);
    }
    command.output().expect("tern-probe runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn usage_errors_exit_non_zero_with_a_message() {
    let output = probe(&["127.0.0.1", "60001"], None);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("MOSH_KEY is not set"), "{}", stderr(&output));

    let output = probe(&["127.0.0.1"], Some("AAECAwQFBgcICQoLDA0ODw"));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("usage"), "{}", stderr(&output));

    let output = probe(&["127.0.0.1", "60001"], Some("not-a-key"));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("MOSH_KEY"), "{}", stderr(&output));

    let output =
        probe(&["127.0.0.1", "60001", "--predict", "sometimes"], Some("AAECAwQFBgcICQoLDA0ODw"));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("unknown prediction mode"), "{}", stderr(&output));

    let output = probe(&["127.0.0.1", "60001", "--timeline"], Some("AAECAwQFBgcICQoLDA0ODw"));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--timeline needs --json"), "{}", stderr(&output));

    let script = std::env::temp_dir().join(format!("tern-probe-bad-{}.script", std::process::id()));
    std::fs::write(&script, "type ok\nfly away\n").expect("write script");
    let output = probe(
        &["127.0.0.1", "60001", "--script", script.to_str().expect("utf-8")],
        Some("AAECAwQFBgcICQoLDA0ODw"),
    );
    std::fs::remove_file(&script).ok();
    assert!(!output.status.success());
    assert!(stderr(&output).contains("script line 2"), "{}", stderr(&output));
}

fn start_sh() -> MoshServer {
    let options = MoshServerOptions {
        command: vec!["/bin/sh".into()],
        env: vec![("PS1".into(), "$ ".into()), ("ENV".into(), String::new())],
        ..MoshServerOptions::default()
    };
    MoshServer::start(&options).unwrap_or_else(|e| panic!("mosh-server is required: {e}"))
}

#[test]
fn runs_a_script_against_the_real_server_and_prints_text_and_json() {
    let server = start_sh();
    let script = std::env::temp_dir().join(format!("tern-probe-ok-{}.script", std::process::id()));
    std::fs::write(&script, "wait-text $\ntype echo tern-$((6*7))\\r\nwait-text tern-42\n")
        .expect("write");
    let port = server.port.to_string();
    let key = server.key.to_base64();
    let args = [
        "127.0.0.1",
        port.as_str(),
        "--size",
        "100x30",
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ];
    let output = probe(&args, Some(&key));
    std::fs::remove_file(&script).ok();
    server.kill();
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 30, "the --size was used");
    assert!(rows.iter().any(|r| r == "tern-42"), "{json}");
    assert!(json["cursor"]["row"].is_u64() && json["cursor"]["col"].is_u64());
    assert_eq!(json["counters"]["dropped_unknown_base"], 0);
    assert!(json["counters"]["datagrams_in"].as_u64().expect("counter") > 0);
    assert!(
        !key.is_empty() && !String::from_utf8_lossy(&output.stdout).contains(&key),
        "the key is never printed"
    );
    // Prediction: adaptive by default (mosh-client's default); the display frame at the end is
    // the server's screen (every prediction judged by then).
    assert_eq!(json["predict"]["mode"], "adaptive", "{json}");
    assert_eq!(json["predict"]["overwrite"], false);
    for counter in ["made", "drawn", "confirmed", "wrong_drawn", "epochs_killed", "resets"] {
        assert!(json["predict"][counter].is_u64(), "predict.{counter} in {json}");
    }
    assert_eq!(json["display_rows"], json["rows"]);
    assert_eq!(json["display_cursor"], json["cursor"]);
    assert!(json.get("timeline").is_none(), "a timeline only when asked for");
}

#[test]
fn predict_options_and_the_timeline() {
    let server = start_sh();
    let script =
        std::env::temp_dir().join(format!("tern-probe-predict-{}.script", std::process::id()));
    std::fs::write(
        &script,
        "wait-text $\ntype e\nsleep 50\ntype cho x$((6*7))\\r\nwait-text x42\n",
    )
    .expect("write");
    let port = server.port.to_string();
    let key = server.key.to_base64();
    let args = [
        "127.0.0.1",
        port.as_str(),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
        "--predict",
        "always",
        "--predict-overwrite",
        "--timeline",
    ];
    let output = probe(&args, Some(&key));
    std::fs::remove_file(&script).ok();
    server.kill();
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    assert_eq!(json["predict"]["mode"], "always", "{json}");
    assert_eq!(json["predict"]["overwrite"], true);
    assert!(json["predict"]["made"].as_u64().expect("made") >= 6, "typed letters predicted");
    assert_eq!(json["display_rows"], json["rows"]);
    let timeline = &json["timeline"];
    let keys = timeline["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 2, "one entry per type action");
    assert_eq!(keys[0]["bytes"], serde_json::json!([101]));
    let t0 = keys[0]["t_us"].as_u64().expect("t_us");
    assert!(keys[1]["t_us"].as_u64().expect("t_us") >= t0 + 50_000, "{keys:?}");
    for list in ["display", "server"] {
        let snapshots = timeline[list].as_array().expect(list);
        assert!(snapshots.len() >= 2, "{list}: {snapshots:?}");
        let times: Vec<u64> = snapshots.iter().map(|s| s["t_us"].as_u64().expect("t")).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{list} in time order");
        let last = snapshots.last().expect("last");
        assert_eq!(last["rows"].as_array().expect("rows").len(), 24);
        assert!(last["rows"].as_array().expect("rows").iter().any(|r| r == "x42"), "{last}");
    }
}
