//! A new client takes over a real mosh-server 1.4 session from one that went away without
//! quitting (what a page reload does), from a [`ResumePoint`]: the old screen shows before the
//! server says anything, the shell is the same, and keys typed up to the moment of the switch
//! arrive once, in order.
//!
//! Fails, loudly, when mosh-server is not installed: `npm test` installs it.

use std::net::SocketAddr;
use std::time::Duration;

use tern::session::{ResumePoint, SessionConfig};
use tern::terminal::{Complete, screen_text};
use tern_native::{MoshServer, NativeClient};

mod support;
use support::{TIMEOUT, start_sh_server, text, wait_for};

fn addr(server: &MoshServer) -> SocketAddr {
    ([127, 0, 0, 1], server.port).into()
}

/// The shell's PID, from the `marker-PID` line its `echo marker-$$` printed.
fn marker_pid(screen: &str, marker: &str) -> Option<String> {
    screen.lines().filter(|l| !l.contains("$$")).find_map(|l| {
        let at = l.find(marker)? + marker.len();
        let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
        (!digits.is_empty()).then_some(digits)
    })
}

/// A client at a prompt that printed its shell's PID.
fn first_client(server: &MoshServer) -> (NativeClient<Complete>, String) {
    let mut client: NativeClient<Complete> =
        NativeClient::connect(addr(server), SessionConfig::new(server.key.clone(), 80, 24))
            .expect("udp");
    assert!(wait_for(&mut client, "$"), "no prompt: {:?}", client.session().last_error());
    client.type_bytes(b"echo marker-$$\r").expect("udp");
    assert!(
        client
            .run_until(TIMEOUT, |s| marker_pid(
                &screen_text(s.server_state().framebuffer()).rows.join("\n"),
                "marker-"
            )
            .is_some())
            .expect("udp"),
        "no marker: {}",
        text(&client)
    );
    let pid = marker_pid(&text(&client), "marker-").expect("marker");
    (client, pid)
}

/// Resumes with `point` through the encoded form, as storage would hand it back.
fn resume(server: &MoshServer, point: &ResumePoint, cols: u16) -> NativeClient<Complete> {
    let point = ResumePoint::decode(&point.encode()).expect("round trip");
    NativeClient::resume(addr(server), SessionConfig::new(server.key.clone(), cols, 24), &point)
        .expect("resume")
}

#[test]
fn a_new_client_continues_the_shell_with_the_old_screen_shown_at_once() {
    let server = start_sh_server();
    let (mut old, pid) = first_client(&server);
    old.run_for(Duration::from_millis(300)).expect("udp");
    let point = old.session().resume_point();
    let old_screen = text(&old);
    // The old client goes away without quitting (a reload: nothing more from it).
    drop(old);

    let mut new = resume(&server, &point, 80);
    assert_eq!(text(&new), old_screen, "the saved screen, before the server answered");
    new.type_bytes(b"echo again-$$\r").expect("udp");
    assert!(
        new.run_until(TIMEOUT, |s| marker_pid(
            &screen_text(s.server_state().framebuffer()).rows.join("\n"),
            "again-"
        )
        .is_some())
            .expect("udp"),
        "no answer after resuming: {} (last error {:?})",
        text(&new),
        new.session().last_error()
    );
    assert_eq!(marker_pid(&text(&new), "again-").as_deref(), Some(pid.as_str()), "the same shell");
    let c = new.session().counters();
    assert_eq!(c.dropped_unknown_base + c.apply_failures + c.auth_failures, 0, "{c:?}");
    assert!(server.is_alive());
}

#[test]
fn keys_typed_up_to_the_switch_arrive_once_in_order() {
    let server = start_sh_server();
    let (mut old, pid) = first_client(&server);
    // Typed in three bursts; the point is taken at once after the last: some of it may be on
    // the wire, some acknowledged, some not sent at all.
    old.type_bytes(b"echo one-").expect("udp");
    old.run_for(Duration::from_millis(150)).expect("udp");
    old.type_bytes(b"two-").expect("udp");
    old.run_for(Duration::from_millis(2)).expect("udp");
    old.type_bytes(b"three-$$").expect("udp");
    let point = old.session().resume_point();
    drop(old);

    // A narrower window now: the resumed client says so.
    let mut new = resume(&server, &point, 70);
    new.type_bytes(b"\r").expect("udp");
    assert!(
        wait_for(&mut new, &format!("one-two-three-{pid}")),
        "the keys did not arrive once and in order: {}",
        text(&new)
    );
    assert!(!text(&new).contains("one-one-"), "nothing doubled: {}", text(&new));
    let fb = new.session().server_state().framebuffer().size();
    assert_eq!(fb.cols, 70, "the resize went through");
}

#[test]
fn a_second_takeover_from_the_taken_over_client_works_too() {
    let server = start_sh_server();
    let (old, pid) = first_client(&server);
    let point = old.session().resume_point();
    drop(old);
    let mut middle = resume(&server, &point, 80);
    middle.type_bytes(b"echo mid-$$\r").expect("udp");
    assert!(wait_for(&mut middle, &format!("mid-{pid}")), "{}", text(&middle));
    let point = middle.session().resume_point();
    assert!(point.next_seq > 0);
    drop(middle);
    let mut last = resume(&server, &point, 80);
    last.type_bytes(b"echo last-$$\r").expect("udp");
    assert!(wait_for(&mut last, &format!("last-{pid}")), "{}", text(&last));
}
