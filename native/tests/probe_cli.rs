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

#[test]
fn runs_a_script_against_the_real_server_and_prints_text_and_json() {
    let options = MoshServerOptions {
        command: vec!["/bin/sh".into()],
        env: vec![("PS1".into(), "$ ".into()), ("ENV".into(), String::new())],
        ..MoshServerOptions::default()
    };
    let server =
        MoshServer::start(&options).unwrap_or_else(|e| panic!("mosh-server is required: {e}"));
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
}
