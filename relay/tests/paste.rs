//! The paste upload stream against the real relay (bridge mode, a UDP echo server as the
//! target): have/resume/acks/path, a repeat, a wrong hash, and no paste without a paste dir.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use support::*;
use tern_relay::config::ByteSize;
use tokio::net::UdpSocket;

async fn sink() -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while sock.recv_from(&mut buf).await.is_ok() {}
    });
    addr
}

async fn bridged_relay(paste_dir: Option<&std::path::Path>) -> (TestRelay, wtransport::Connection) {
    let token = test_token("paste");
    let target = sink().await;
    let mut config = bridge_config(&token, &[&format!("127.0.0.1:{}", target.port())]);
    config.paste_dir = paste_dir.map(|p| p.to_path_buf());
    config.paste_max_size = ByteSize(4 << 20);
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, bridge_hello(&token, "127.0.0.1", target.port())).await;
    expect_ready(reply);
    std::mem::forget(control); // the control stream must stay open for the session to live
    (relay, conn)
}

#[tokio::test]
async fn upload_acks_resumes_and_publishes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pastes");
    let (relay, conn) = bridged_relay(Some(&dir)).await;
    let mut content = b"\x89PNG\r\n\x1a\n".to_vec();
    content.extend((0..300_000u32).map(|i| (i * 7 % 251) as u8));
    let hash = hex(&content);

    // First attempt: half, then the stream is dropped (an interruption).
    let (mut send, mut recv) = open_upload(&conn, &hash, content.len()).await;
    let first = lines_until(&mut recv, |_| true).await;
    assert_eq!(first[0], serde_json::json!({"have": 0}));
    let half = content.len() / 2;
    send.write_all(&content[..half]).await.unwrap();
    let acks = lines_until(&mut recv, |v| v["acked"].as_u64() == Some(half as u64)).await;
    let last = acks.last().unwrap();
    assert_eq!(last["acked"].as_u64(), Some(half as u64), "{acks:?}");
    assert!(last["relay_time_us"].as_u64().is_some());
    drop(send);
    drop(recv);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Resume: the relay says how much it has; the rest completes it.
    let (mut send, mut recv) = open_upload(&conn, &hash, content.len()).await;
    let have = lines_until(&mut recv, |_| true).await;
    let held = have[0]["have"].as_u64().unwrap() as usize;
    assert_eq!(held, half, "resume from what was acked");
    send.write_all(&content[held..]).await.unwrap();
    let rest =
        lines_until(&mut recv, |v| v.get("path").is_some() || v.get("error").is_some()).await;
    let path = rest.last().unwrap()["path"].as_str().expect("a path").to_string();
    assert_eq!(path, dir.canonicalize().unwrap().join(format!("{hash}.png")).to_str().unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), content);
    let times: Vec<u64> = rest.iter().filter_map(|v| v["relay_time_us"].as_u64()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "relay times never go back");

    // A repeat: the relay has it all and names the path at once.
    let (_send, mut recv) = open_upload(&conn, &hash, content.len()).await;
    let again = lines_until(&mut recv, |_| true).await;
    assert_eq!(again[0], serde_json::json!({"have": content.len(), "path": path}));
    relay.stop().await;
}

#[tokio::test]
async fn wrong_hash_too_large_and_bad_header_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (relay, conn) = bridged_relay(Some(&tmp.path().join("p"))).await;
    let content = b"GIF89a pretend".to_vec();
    let wrong = hex(b"other");
    let (mut send, mut recv) = open_upload(&conn, &wrong, content.len()).await;
    send.write_all(&content).await.unwrap();
    let lines = lines_until(&mut recv, |v| v.get("error").is_some()).await;
    assert_eq!(lines.last().unwrap()["error"], "hash_mismatch", "{lines:?}");

    let (_send, mut recv) = open_upload(&conn, &hex(b"big"), 5 << 20).await;
    let lines = lines_until(&mut recv, |v| v.get("error").is_some()).await;
    assert_eq!(lines.last().unwrap()["error"], "too_large", "{lines:?}");
    assert!(lines.last().unwrap()["message"].as_str().unwrap().contains("4.0 MiB"));

    let (_send, mut recv) = open_upload(&conn, "../../etc/passwd", 10).await;
    let lines = lines_until(&mut recv, |v| v.get("error").is_some()).await;
    assert_eq!(lines.last().unwrap()["error"], "bad_request", "{lines:?}");
    relay.stop().await;
}

/// Opens an upload stream whose content follows the header at once (the page's first stream of
/// a paste), and writes `content` right behind it.
async fn open_eager_upload(
    conn: &wtransport::Connection,
    hash: &str,
    size: usize,
    content: &[u8],
) -> (wtransport::SendStream, wtransport::RecvStream) {
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let header = serde_json::json!({"hash": hash, "size": size, "eager": true});
    let mut bytes = format!("{header}\n").into_bytes();
    bytes.extend_from_slice(content);
    send.write_all(&bytes).await.unwrap();
    (send, recv)
}

/// An eager upload's bytes come with its header: taken from 0 when the relay holds nothing,
/// ignored when it holds a part (it says `have` N and the page resumes on a new stream, the part
/// untouched), and discarded with a refused header (no part is left).
#[tokio::test]
async fn an_eager_upload_is_taken_resumed_elsewhere_or_refused_without_a_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pastes");
    let (relay, conn) = bridged_relay(Some(&dir)).await;
    let mut content = b"\x89PNG\r\n\x1a\n".to_vec();
    content.extend((0..200_000u32).map(|i| (i * 11 % 251) as u8));

    // Nothing held: everything written with the header is the content.
    let hash = hex(&content);
    let (_send, mut recv) = open_eager_upload(&conn, &hash, content.len(), &content).await;
    let lines =
        lines_until(&mut recv, |v| v.get("path").is_some() || v.get("error").is_some()).await;
    assert_eq!(lines[0], serde_json::json!({"have": 0}));
    let path = lines.last().unwrap()["path"].as_str().expect("a path").to_string();
    assert_eq!(std::fs::read(&path).unwrap(), content);

    // A part held (an earlier page's stream broke): the eager bytes from 0 are not the next
    // ones. The relay says what it holds and ends the stream; the part is intact.
    let mut other = content.clone();
    other[100] ^= 0xff;
    let hash = hex(&other);
    let (mut send, mut recv) = open_upload(&conn, &hash, other.len()).await;
    lines_until(&mut recv, |_| true).await;
    let half = other.len() / 2;
    send.write_all(&other[..half]).await.unwrap();
    lines_until(&mut recv, |v| v["acked"].as_u64() == Some(half as u64)).await;
    drop((send, recv));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_send, mut recv) = open_eager_upload(&conn, &hash, other.len(), &other[..60_000]).await;
    let lines = lines_until(&mut recv, |_| false).await;
    assert_eq!(lines, vec![serde_json::json!({"have": half})], "have, then the stream ends");
    let (mut send, mut recv) = open_upload(&conn, &hash, other.len()).await;
    let have = lines_until(&mut recv, |_| true).await;
    assert_eq!(have[0]["have"].as_u64(), Some(half as u64), "the eager bytes were not taken");
    send.write_all(&other[half..]).await.unwrap();
    let rest =
        lines_until(&mut recv, |v| v.get("path").is_some() || v.get("error").is_some()).await;
    let path = rest.last().unwrap()["path"].as_str().expect("a path").to_string();
    assert_eq!(std::fs::read(&path).unwrap(), other, "byte-identical");

    // Refused (over the size limit): an error, the bytes discarded, no part left behind.
    let big = vec![7u8; 100_000];
    let (_send, mut recv) = open_eager_upload(&conn, &hex(b"big"), 5 << 20, &big).await;
    let lines = lines_until(&mut recv, |v| v.get("error").is_some()).await;
    assert_eq!(lines.last().unwrap()["error"], "too_large", "{lines:?}");
    let parts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&hex(b"big")))
        .collect();
    assert!(parts.is_empty(), "nothing kept of a refused upload: {parts:?}");
    // The connection is still good for the next upload.
    let small = b"GIF89a small".to_vec();
    let (_send, mut recv) = open_eager_upload(&conn, &hex(&small), small.len(), &small).await;
    let lines =
        lines_until(&mut recv, |v| v.get("path").is_some() || v.get("error").is_some()).await;
    assert!(lines.last().unwrap().get("path").is_some(), "{lines:?}");
    relay.stop().await;
}

#[tokio::test]
async fn bridge_mode_without_a_paste_dir_says_paste_is_unavailable() {
    let (relay, conn) = bridged_relay(None).await;
    let (_send, mut recv) = open_upload(&conn, &hex(b"x"), 1).await;
    let lines = lines_until(&mut recv, |v| v.get("error").is_some()).await;
    let last = lines.last().unwrap();
    assert_eq!(last["error"], "paste_unavailable");
    assert!(last["message"].as_str().unwrap().contains("--paste-dir"));
    let (status, info) = http_get(relay.addr(), "/api/info", Some(&relay.token())).await;
    assert_eq!(status, 200);
    assert!(info.contains(r#""available":false"#), "{info}");
    relay.stop().await;
}

/// The page's upload client (`tern::paste::UploadJob`, the code the browser runs) against the real
/// relay: header, `have`, paced chunks, acks, an interrupted stream resumed from what the relay
/// holds, the published path.
#[tokio::test]
async fn the_pages_upload_job_uploads_and_resumes_against_the_real_relay() {
    use tern::paste::{JobOutcome, UploadJob};
    use tern::relay_proto::{LineBuffer, UploadReply, decode, upload::MAX_REPLY};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pastes");
    let (relay, conn) = bridged_relay(Some(&dir)).await;
    let mut content = b"\x89PNG\r\n\x1a\n".to_vec();
    content.extend((0..900_000u32).map(|i| (i * 13 % 251) as u8));
    let hash: [u8; 32] = Sha256::digest(&content).into();
    let origin = std::time::Instant::now();
    let now = || tern::time::Instant::from_micros(origin.elapsed().as_micros() as u64);
    let mut job = UploadJob::new(hash, content.len() as u64, "image/png", now());
    let mut interrupted = false;

    while job.outcome().is_none() {
        // Wait for the job to want a stream (the retry pause after an interruption).
        while !job.wants_stream(now(), true) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            job.handle_timeout(now());
        }
        let (mut send, mut recv) = conn.open_bi().await.unwrap().await.unwrap();
        send.write_all(&job.stream_opened(now()).to_line()).await.unwrap();
        let mut lines = LineBuffer::new(MAX_REPLY);
        let mut chunk = [0u8; 4096];
        'stream: loop {
            while let Some(range) = job.poll_chunk(now()) {
                send.write_all(&content[range.start as usize..range.end as usize]).await.unwrap();
            }
            let wait = job
                .poll_timeout()
                .map_or(Duration::from_millis(50), |t| t.saturating_duration_since(now()));
            let read =
                tokio::time::timeout(wait.max(Duration::from_millis(1)), recv.read(&mut chunk));
            match read.await {
                Err(_) => job.handle_timeout(now()),
                Ok(Ok(Some(n))) => lines.push(&chunk[..n]),
                Ok(_) => {
                    job.stream_ended(now());
                    break 'stream;
                }
            }
            while let Some(line) = lines.next_line().unwrap() {
                let reply: UploadReply = decode(&line).expect("the page reads every relay line");
                let acked = matches!(reply, UploadReply::Ack { acked, .. } if acked > content.len() as u64 / 3);
                job.handle_reply(now(), reply);
                if job.outcome().is_some() {
                    break 'stream;
                }
                if acked && !interrupted {
                    // The link breaks a third of the way: this stream is gone.
                    interrupted = true;
                    drop(send);
                    drop(recv);
                    job.stream_ended(now());
                    break 'stream;
                }
            }
        }
    }
    let Some(JobOutcome::Done(path)) = job.outcome() else { panic!("{:?}", job.outcome()) };
    assert_eq!(std::fs::read(&path).unwrap(), content, "byte-identical");
    assert!(interrupted);
    assert_eq!(job.streams, 2, "resumed on a second stream");
    assert!(job.bytes_skipped > content.len() as u64 / 3, "resumed from the relay's bytes");
    assert!(job.bytes_sent < content.len() as u64 * 3 / 2, "sent {}", job.bytes_sent);
    relay.stop().await;
}

/// Two uploads that each fit the quota but not together, started at once (the first has sent
/// little yet, so the directory does not show its size): admission reserved nothing, so both
/// were taken and the quota overrun by up to a paste per stream. Now the first one's announced
/// size is reserved at admission and the second is refused. A stream that then stops sending
/// is cut after --paste-idle-timeout and its reservation freed: the second goes through.
#[tokio::test]
async fn concurrent_uploads_share_the_quota_and_an_idle_one_is_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let token = test_token("paste-quota");
    let target = sink().await;
    let mut config = bridge_config(&token, &[&format!("127.0.0.1:{}", target.port())]);
    config.paste_dir = Some(tmp.path().join("pastes"));
    config.paste_max_size = ByteSize(4 << 20);
    config.paste_quota = ByteSize(1 << 20);
    config.paste_idle_timeout_secs = 2;
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, bridge_hello(&token, "127.0.0.1", target.port())).await;
    expect_ready(reply);

    let a: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..700_000u32).map(|i| (i % 241) as u8).collect();
    let (mut send_a, mut recv_a) = open_upload(&conn, &hex(&a), a.len()).await;
    assert_eq!(lines_until(&mut recv_a, |_| true).await[0], serde_json::json!({"have": 0}));
    send_a.write_all(&a[..1000]).await.unwrap();
    lines_until(&mut recv_a, |v| v["acked"].as_u64() == Some(1000)).await;

    let (_send_b, mut recv_b) = open_upload(&conn, &hex(&b), b.len()).await;
    let refused = lines_until(&mut recv_b, |_| true).await;
    assert_eq!(refused[0]["error"], "quota_exceeded", "the second upload: {refused:?}");

    // The first stream goes quiet: cut, told why, its share freed.
    let cut = lines_until(&mut recv_a, |v| v.get("error").is_some()).await;
    let last = cut.last().unwrap();
    assert!(last["message"].as_str().unwrap().contains("nothing arrived for 2 s"), "{cut:?}");
    let (mut send_b, mut recv_b) = open_upload(&conn, &hex(&b), b.len()).await;
    assert_eq!(lines_until(&mut recv_b, |_| true).await[0], serde_json::json!({"have": 0}));
    send_b.write_all(&b).await.unwrap();
    let done =
        lines_until(&mut recv_b, |v| v.get("path").is_some() || v.get("error").is_some()).await;
    assert!(done.last().unwrap().get("path").is_some(), "{done:?}");
    drop(control);
    relay.stop().await;
}
