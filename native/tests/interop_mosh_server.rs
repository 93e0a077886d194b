//! Interop with the real mosh-server 1.4 (Debian package `mosh`) over real UDP on loopback.
//!
//! These tests fail, loudly, when mosh-server is not installed: `npm test` installs it.

use std::net::SocketAddr;
use std::time::Duration;

use tern::session::{CloseReason, HostLog, SessionConfig};
use tern_native::{MoshServer, NativeClient};

mod support;
use support::start_sh_server;

fn connect(server: &MoshServer) -> NativeClient<HostLog> {
    let addr: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let mut config = SessionConfig::new(server.key.clone(), 80, 24);
    config.seed = 42;
    NativeClient::connect(addr, config).expect("udp socket")
}

/// Runs the client until `needle` shows in the host bytes; false after `TIMEOUT`.
fn wait_for(client: &mut NativeClient<HostLog>, needle: &[u8]) -> bool {
    client.run_until(TIMEOUT, |s| s.server_state().contains(needle)).expect("udp")
}

const TIMEOUT: Duration = Duration::from_secs(10);

/// A fresh server and a client that has seen its prompt.
fn session_at_prompt() -> (support::ShServer, NativeClient<HostLog>) {
    let server = start_sh_server();
    let mut client = connect(&server);
    assert!(
        wait_for(&mut client, b"$ "),
        "no prompt; last error: {:?}",
        client.session().last_error()
    );
    (server, client)
}

#[test]
fn types_a_command_sees_its_output_then_exit_completes_the_shutdown_handshake() {
    let (server, mut client) = session_at_prompt();
    client.type_bytes(b"echo tern-$((6*7))\r").expect("io");
    assert!(
        wait_for(&mut client, b"tern-42"),
        "no tern-42 in the host bytes: {:?}",
        String::from_utf8_lossy(client.session().server_state().bytes())
    );

    client.type_bytes(b"exit\r").expect("io");
    client.run_until(Duration::from_secs(10), |_| false).expect("io");
    assert_eq!(client.closed(), Some(CloseReason::ServerShutdown));
    assert!(
        server.wait_gone(Duration::from_secs(10)),
        "mosh-server still runs after the handshake"
    );

    let counters = client.session().counters();
    assert_eq!(counters.dropped_unknown_base, 0, "{counters:?}");
    assert_eq!(
        counters.auth_failures + counters.malformed + counters.apply_failures,
        0,
        "{counters:?}"
    );
    assert!(client.session().srtt() < Duration::from_millis(500), "timestamps were echoed");
}

#[test]
fn client_initiated_shutdown_ends_the_server() {
    let (server, mut client) = session_at_prompt();
    client.shutdown().expect("io");
    client.run_until(Duration::from_secs(15), |_| false).expect("io");
    assert_eq!(client.closed(), Some(CloseReason::ClientShutdown));
    assert!(server.wait_gone(Duration::from_secs(10)), "mosh-server still runs");
}

#[test]
fn roaming_to_a_new_port_keeps_the_session() {
    let (server, mut client) = session_at_prompt();
    client.rebind().expect("new socket");
    client.type_bytes(b"echo roamed-$((2+3))\r").expect("io");
    assert!(
        wait_for(&mut client, b"roamed-5"),
        "the server did not follow the client to its new port"
    );
    server.kill();
}

#[test]
fn garbage_datagrams_from_the_network_are_counted_not_fatal() {
    let (server, mut client) = session_at_prompt();
    // Another process sprays the client's port with junk while the session goes on.
    let target = client.local_addr().expect("bound");
    let sprayer = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    for len in [0usize, 1, 23, 24, 25, 100, 1500] {
        let junk: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
        sprayer.send_to(&junk, target).expect("send");
    }
    client.type_bytes(b"echo still-$((1+1))\r").expect("io");
    assert!(wait_for(&mut client, b"still-2"));
    assert!(client.session().counters().auth_failures >= 1);
    server.kill();
}
