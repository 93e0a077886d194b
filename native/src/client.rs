//! A blocking UDP loop around [`ClientSession`] with the real clock: the core's simplest driver.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use tern::session::{
    ClientSession, CloseReason, Event, ResumeError, ResumePoint, ServerState, SessionConfig,
};
use tern::terminal::Complete;
use tern::time::Instant;

/// Largest datagram mosh accepts (`Session::RECEIVE_MTU`).
const RECEIVE_BUFFER: usize = 2048;
/// Never sleep less than this when waiting (a timer already due still gets a handle_timeout).
const MIN_WAIT: Duration = Duration::from_micros(200);
/// A socket receive timeout (SO_RCVTIMEO) counts in scheduler ticks and rounds up: with HZ=250 a
/// 1 ms timeout returns after 8 ms, so a typed key due in 1 ms left 8-12 ms late. Blocking
/// receives therefore stop this much before the deadline...
const COARSE_SLACK: Duration = Duration::from_millis(10);
/// ...and the rest of the wait polls the socket between precise sleeps of at most this long.
const FINE_STEP: Duration = Duration::from_micros(200);

/// Why [`NativeClient::resume`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeFailed {
    #[error(transparent)]
    Point(#[from] ResumeError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A [`ClientSession`] driven over a real UDP socket and the monotonic clock.
#[derive(Debug)]
pub struct NativeClient<S: ServerState> {
    session: ClientSession<S>,
    /// Not connected: like mosh-client it takes datagrams from any source and lets authentication
    /// decide.
    socket: UdpSocket,
    server: SocketAddr,
    origin: std::time::Instant,
    closed: Option<CloseReason>,
    /// Server state changes seen so far.
    pub state_changes: u64,
}

impl NativeClient<Complete> {
    /// Binds an ephemeral local port and continues the session `point` was taken from (a new
    /// process taking over a session another one left; see [`tern::session::ResumePoint`]).
    pub fn resume(
        server: SocketAddr,
        config: SessionConfig,
        point: &ResumePoint,
    ) -> Result<NativeClient<Complete>, ResumeFailed> {
        let local: SocketAddr = if server.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .expect("literal socket address");
        let socket = UdpSocket::bind(local)?;
        let origin = std::time::Instant::now();
        let session = ClientSession::resume(config, point, Instant::ZERO)?;
        let mut client =
            NativeClient { session, socket, server, origin, closed: None, state_changes: 0 };
        client.flush()?;
        Ok(client)
    }
}

impl<S: ServerState> NativeClient<S> {
    /// Binds an ephemeral local port and starts a session with the server at `server`.
    pub fn connect(server: SocketAddr, config: SessionConfig) -> io::Result<Self> {
        let local: SocketAddr = if server.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .expect("literal socket address");
        let socket = UdpSocket::bind(local)?;
        let origin = std::time::Instant::now();
        let session = ClientSession::new(config, Instant::ZERO);
        let mut client =
            NativeClient { session, socket, server, origin, closed: None, state_changes: 0 };
        client.flush()?;
        Ok(client)
    }

    pub fn now(&self) -> Instant {
        let micros = self.origin.elapsed().as_micros();
        Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    pub fn session(&self) -> &ClientSession<S> {
        &self.session
    }

    pub fn session_mut(&mut self) -> &mut ClientSession<S> {
        &mut self.session
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn closed(&self) -> Option<CloseReason> {
        self.closed
    }

    /// Moves to a new local UDP socket (a new source port), as a roaming client does.
    pub fn rebind(&mut self) -> io::Result<()> {
        let ip = self.socket.local_addr()?.ip();
        self.socket = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        Ok(())
    }

    pub fn type_bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        let now = self.now();
        self.session.handle_input(now, bytes);
        self.flush()
    }

    pub fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        let now = self.now();
        self.session.handle_resize(now, cols, rows);
        self.flush()
    }

    pub fn shutdown(&mut self) -> io::Result<()> {
        let now = self.now();
        self.session.shutdown(now);
        self.flush()
    }

    /// Runs the loop until `done` holds, the session closes, or `timeout` passes.
    /// Returns whether `done` held.
    pub fn run_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&ClientSession<S>) -> bool,
    ) -> io::Result<bool> {
        self.run_until_mut(timeout, |session, _| done(session))
    }

    /// [`run_until`](Self::run_until) for a `done` that needs the session mutably (to build the
    /// display frame, say) and the time: it is called first and then after every datagram and
    /// timer the loop handled, with the session's current time.
    pub fn run_until_mut(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&mut ClientSession<S>, Instant) -> bool,
    ) -> io::Result<bool> {
        let deadline = std::time::Instant::now() + timeout;
        let mut buffer = [0u8; RECEIVE_BUFFER];
        loop {
            let now = self.now();
            if done(&mut self.session, now) {
                return Ok(true);
            }
            if self.closed.is_some() {
                return Ok(false);
            }
            let wall = std::time::Instant::now();
            if wall >= deadline {
                return Ok(false);
            }
            let now = self.now();
            let until_timer = self
                .session
                .poll_timeout()
                .map_or(Duration::MAX, |at| at.saturating_duration_since(now));
            let wait = until_timer.min(deadline - wall).max(MIN_WAIT);
            match self.recv_within(wait, &mut buffer) {
                Ok(len) => {
                    let now = self.now();
                    self.session.handle_datagram(now, &buffer[..len]);
                }
                // A signal (a child process ending, say) interrupts the wait: just look again.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
                {
                    let now = self.now();
                    self.session.handle_timeout(now);
                }
                // A port that is not (yet) listening answers with ICMP; mosh keeps trying.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::thread::sleep(MIN_WAIT);
                    let now = self.now();
                    self.session.handle_timeout(now);
                }
                Err(e) => return Err(e),
            }
            self.flush()?;
        }
    }

    /// Receives one datagram within `wait`, or fails with `WouldBlock`/`TimedOut` when none came.
    /// Returns within about [`FINE_STEP`] of the deadline (see [`COARSE_SLACK`]).
    fn recv_within(&self, wait: Duration, buffer: &mut [u8]) -> io::Result<usize> {
        let deadline = std::time::Instant::now() + wait;
        if let Some(coarse) = wait.checked_sub(COARSE_SLACK).filter(|d| !d.is_zero()) {
            self.socket.set_nonblocking(false)?;
            self.socket.set_read_timeout(Some(coarse))?;
            match self.socket.recv_from(buffer) {
                Err(e)
                    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                other => return other.map(|(len, _from)| len),
            }
        }
        self.socket.set_nonblocking(true)?;
        loop {
            match self.socket.recv_from(buffer) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other.map(|(len, _from)| len),
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // thread::sleep is a nanosleep: precise, unlike the socket timeout.
            std::thread::sleep(FINE_STEP.min(deadline - now));
        }
    }

    /// Runs for `duration`, whatever happens (keeps acking, as a live client does).
    pub fn run_for(&mut self, duration: Duration) -> io::Result<()> {
        self.run_until(duration, |_| false).map(|_| ())
    }

    fn send_retrying(&self, datagram: &[u8]) -> io::Result<()> {
        loop {
            match self.socket.send_to(datagram, self.server) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The socket may be non-blocking (see `recv_within`): wait for buffer space.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(FINE_STEP),
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends what the session has to send and collects its events.
    fn flush(&mut self) -> io::Result<()> {
        while let Some(datagram) = self.session.poll_transmit() {
            match self.send_retrying(&datagram) {
                Ok(()) => {}
                // Loss is the transport's business; a refused send is like a lost datagram.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
        while let Some(event) = self.session.poll_event() {
            match event {
                Event::ServerStateChanged { .. } => self.state_changes += 1,
                Event::Closed(reason) => self.closed = Some(reason),
            }
        }
        Ok(())
    }
}
