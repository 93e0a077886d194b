//! The core against the real mosh-server through the link emulator: a slow, lossy path.

use std::net::SocketAddr;
use std::time::Duration;

use tern::session::{CloseReason, HostLog, SessionConfig};
use tern_native::{MoshServer, MoshServerOptions, NativeClient};
use tern_tests::linkemu::{DirectionConfig, LinkConfig, LinkEmulator};
use tern_tests::tools::require_program;

fn start_server() -> MoshServer {
    let program = require_program("mosh-server");
    let options = MoshServerOptions {
        program,
        command: vec!["/bin/sh".into()],
        env: vec![("PS1".into(), "$ ".into()), ("ENV".into(), String::new())],
        ..MoshServerOptions::default()
    };
    MoshServer::start(&options).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn command_and_shutdown_complete_at_200ms_rtt_with_10_percent_loss_each_way() {
    let server = start_server();
    let target: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let lossy = DirectionConfig {
        delay: Duration::from_millis(100),
        loss: 0.10,
        ..DirectionConfig::default()
    };
    let mut link = LinkConfig::new("127.0.0.1:0".parse().expect("literal"), target);
    link.up = lossy.clone();
    link.down = lossy;
    link.seed = Some(2026);
    let emulator = LinkEmulator::start(link).expect("link emulator");

    let config = SessionConfig::new(server.key.clone(), 80, 24);
    let mut client: NativeClient<HostLog> =
        NativeClient::connect(emulator.local_addr(), config).expect("socket");
    let prompt = client
        .run_until(Duration::from_secs(30), |s| s.server_state().contains(b"$ "))
        .expect("io");
    assert!(prompt, "no prompt through the lossy link (seed {})", emulator.seed());

    client.type_bytes(b"echo tern-$((6*7))\r").expect("io");
    let output = client
        .run_until(Duration::from_secs(30), |s| s.server_state().contains(b"tern-42"))
        .expect("io");
    assert!(output, "no tern-42 through the lossy link (seed {})", emulator.seed());

    // Enough round trips that the loss really bites in both directions.
    for i in 1..=20 {
        let expected = format!("line-{}", 1000 + i);
        client.type_bytes(format!("echo line-$((1000+{i}))\r").as_bytes()).expect("io");
        let seen = client
            .run_until(Duration::from_secs(30), |s| s.server_state().contains(expected.as_bytes()))
            .expect("io");
        assert!(seen, "no {expected} through the lossy link (seed {})", emulator.seed());
    }

    client.type_bytes(b"exit\r").expect("io");
    client.run_until(Duration::from_secs(30), |_| false).expect("io");
    assert_eq!(client.closed(), Some(CloseReason::ServerShutdown), "seed {}", emulator.seed());
    assert!(
        server.wait_gone(Duration::from_secs(15)),
        "mosh-server still runs after the handshake"
    );

    let counters = client.session().counters();
    let stats = emulator.stats();
    println!("client counters: {counters:?}\nlink: {stats:?}\nsrtt: {:?}", client.session().srtt());
    assert_eq!(counters.dropped_unknown_base, 0, "{counters:?}");
    assert!(
        stats.up.dropped_loss > 0 && stats.down.dropped_loss > 0,
        "the link lost nothing: {stats:?}"
    );
    assert!(
        client.session().srtt() >= Duration::from_millis(150),
        "the emulated delay was in the path"
    );
    server.kill();
}
