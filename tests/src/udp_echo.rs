//! A UDP echo peer on loopback, the far end of a relay's bridge when what is measured is the relay
//! (the suite's relay rows in `tern-bench`, its `relay_latency` example): every datagram longer
//! than one byte comes back as it was; `blast:N:LEN` is answered by N datagrams of LEN bytes, as
//! fast as the socket takes them. Every datagram received is counted, so a burst toward the peer
//! can be counted at the far end. One-byte datagrams are counted and not answered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::UdpSocket;

/// Binds the peer on 127.0.0.1 and serves it on a task of the current tokio runtime until the
/// runtime ends; counts each datagram it receives in `received`.
pub async fn spawn(received: Arc<AtomicU64>) -> std::io::Result<SocketAddr> {
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    let addr = sock.local_addr()?;
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else { return };
            received.fetch_add(1, Ordering::Relaxed);
            let msg = &buf[..n];
            if let Some((count, len)) = blast(msg) {
                let payload = vec![7u8; len];
                for _ in 0..count {
                    let _ = sock.send_to(&payload, from).await;
                }
            } else if n > 1 {
                let _ = sock.send_to(msg, from).await;
            }
        }
    });
    Ok(addr)
}

/// `blast:N:LEN` as (N, LEN); a malformed count or length is 0 datagrams or 1 byte.
fn blast(msg: &[u8]) -> Option<(u32, usize)> {
    let rest = std::str::from_utf8(msg).ok()?.strip_prefix("blast:")?;
    let (count, len) = rest.split_once(':')?;
    Some((count.parse().unwrap_or(0), len.parse().unwrap_or(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blast_requests_parse() {
        assert_eq!(blast(b"blast:3:1000"), Some((3, 1000)));
        assert_eq!(blast(b"blast:x:y"), Some((0, 1)));
        assert_eq!(blast(b"hello"), None);
        assert_eq!(blast(&[0xff, 0x00]), None);
    }
}
