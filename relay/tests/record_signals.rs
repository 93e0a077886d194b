//! OSC sequences mosh-server 1.4 drops, through the real recorder (issue 34 item 3): a script
//! prints OSC 52 with selectors mosh ignores (`p`) and a 200 kB write (over mosh's 16384
//! characters), OSC 9 and OSC 777 notifications, and an OSC 52 mosh keeps (`c`, short). The
//! recorder hands the dropped ones to the relay's socket (here a listener of the test's own, as
//! `TERN_SOCKET`); what reaches the outer pty (mosh-server's) is the text unchanged, with the
//! OSC 52 mosh keeps still in it and none of the lifted ones.

mod pty;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use base64::Engine;
use rustix::termios::Winsize;
use serde_json::Value;

const SESSION: &str = "0123456789abcdef";
const SIZE: Winsize = Winsize { ws_row: 24, ws_col: 80, ws_xpixel: 800, ws_ypixel: 480 };

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn clipboard_writes_and_notifications_mosh_drops_reach_the_relay_and_the_text_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tern.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let big = "z".repeat(200 * 1024);
    std::fs::write(dir.path().join("big.b64"), b64(&big)).unwrap();
    let script = format!(
        "printf 'one\\n\\033]52;p;{}\\007two\\n'; \
         printf '\\033]52;c;'; cat big.b64; printf '\\033\\\\three\\n'; \
         printf '\\033]9;Build finished\\007four\\n'; \
         printf '\\033]777;notify;Agent;Waiting for input\\033\\\\five\\n'; \
         printf '\\033]52;c;{}\\007six\\n'; \
         printf 'see \\033]8;;https://example.com/docs\\033\\\\the docs\\033]8;;\\033\\\\ now\\n'",
        b64("primary text"),
        b64("mosh keeps this"),
    );
    // The relay's end: each signal is one connection with one request line, read as it comes
    // (a 200 kB line does not fit a socket's buffer).
    let reader = std::thread::spawn(move || {
        let mut requests = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while requests.len() < 5 && Instant::now() < deadline {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let mut line = String::new();
                    BufReader::new(s).read_line(&mut line).unwrap();
                    requests.push(serde_json::from_str::<Value>(&line).unwrap());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        requests
    });
    let (mut child, mut master) = pty::start_recorder(SIZE, |c| {
        c.arg("--history-dir").arg(dir.path()).args(["--session", SESSION, "--", "sh", "-c"]);
        c.arg(&script).current_dir(dir.path()).env("TERN_SOCKET", &socket);
    });
    let (mut out, mut buf) = (Vec::new(), [0u8; 65536]);
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert!(child.wait().unwrap().success());
    // The pty turns \n into \r\n.
    let text = String::from_utf8_lossy(&out).into_owned();
    let kept = format!("\x1b]52;c;{}\x07", b64("mosh keeps this"));
    assert_eq!(
        text,
        format!("one\r\ntwo\r\nthree\r\nfour\r\nfive\r\n{kept}six\r\nsee the docs now\r\n"),
        "the text is unchanged; only the OSC 52 mosh keeps is still in it"
    );
    assert!(!contains(&out, b"]52;p") && !contains(&out, b"]9;") && !contains(&out, b"]777"));
    assert!(!contains(&out, b"]8;"));
    let requests = reader.join().unwrap();
    assert_eq!(requests.len(), 5, "{requests:?}");
    assert_eq!(requests[0]["clipboard"]["session"], SESSION);
    assert_eq!(requests[0]["clipboard"]["text"], "primary text");
    assert_eq!(requests[1]["clipboard"]["text"].as_str().unwrap().len(), big.len());
    assert_eq!(requests[1]["clipboard"]["text"], big.as_str());
    assert_eq!(requests[2]["notify"]["title"], "");
    assert_eq!(requests[2]["notify"]["body"], "Build finished");
    assert_eq!(requests[3]["notify"]["title"], "Agent");
    assert_eq!(requests[3]["notify"]["body"], "Waiting for input");
    // The link's text as the screen shows it, and its column.
    assert_eq!(requests[4]["link"]["url"], "https://example.com/docs");
    assert_eq!(requests[4]["link"]["text"], "the docs");
    assert_eq!(requests[4]["link"]["col"], 4);
}
