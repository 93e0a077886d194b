//! The bridge of a ready session: browser datagrams to the mosh-server's UDP socket (rate
//! limited, checked by the registry for nonce safety, passed on as they are), server datagrams
//! framed to the browser, both shown to the relay's copy of the session, pings and seeds
//! answered, further streams handed to [`super::streams`], until something ends the session or
//! another page takes it.

use std::ops::ControlFlow;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use tern::relay_proto::PageSignal;
use tern::relay_proto::framing::{MAX_PARTS, Splitter};

use super::handshake::Control;
use super::hold::{Hold, Route};
use super::{Attached, SessionContext};
use crate::control::{ClientMessage, ErrorCode, ReadError, ServerMessage};
use crate::limits::TokenBucket;
use crate::link::{BrowserLink, RecvHalf, SendHalf};
use crate::registry::{SAVE_INTERVAL, Verdict, datagram_seq};
use crate::state::pid_alive;

/// How often a spawned mosh-server's pid is checked while bridged.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(5);
/// Datagrams from mosh-server are at most 2048 bytes (its receive MTU); read with room to spare
/// so an oversized one is seen as such instead of truncated.
const UDP_BUF: usize = 4096;
/// At most one rate-limit warning per this interval per session.
const WARN_INTERVAL: Duration = Duration::from_secs(10);
/// The log target of one event per datagram forwarded (length only, never content), for timing
/// each hop of a keystroke's echo (`RUST_LOG=tern_relay::hops=trace`;
/// tests/browser/bench/echo-bench.mjs `--hops`). Off unless asked: a disabled trace event costs a
/// branch.
const HOPS: &str = "tern_relay::hops";
/// The log target of each client datagram's sequence number (never its content), for the
/// nonce-reuse checks of tests/browser/tests/resume.test.mjs (`RUST_LOG=tern_relay::seqs=trace`).
const SEQS: &str = "tern_relay::seqs";

/// Why a bridged session is over.
#[derive(Debug)]
pub(super) enum End {
    /// The relay ends it and tells the browser why (the `ended` line).
    Ended { code: ErrorCode, message: String },
    /// The browser closed the connection or the control stream: nobody to tell.
    BrowserGone(&'static str),
    /// Another page took the session over (the `moved` line).
    Moved,
}

impl End {
    pub(super) fn ended(code: ErrorCode, message: impl Into<String>) -> Self {
        End::Ended { code, message: message.into() }
    }
}

type Step = ControlFlow<End>;

/// The largest framed datagram to send: the relay's cap, the browser's word, the connection's
/// current limit, whichever is smallest.
pub(super) fn datagram_limit(
    shared: &SessionContext,
    conn: &BrowserLink,
    browser: Option<usize>,
) -> usize {
    let mut limit = shared.settings.max_datagram_size;
    if let Some(b) = browser {
        limit = limit.min(b);
    }
    if let Some(c) = conn.max_datagram_size() {
        limit = limit.min(c);
    }
    limit
}

/// Forwards both ways until something ends the session; returns why.
pub(super) async fn run(
    shared: &SessionContext,
    conn: &BrowserLink,
    control: &mut Control,
    session: &Attached,
) -> End {
    let mut bridge = Bridge::new(shared, conn, session);
    let mut buf = vec![0u8; UDP_BUF];
    let mut liveness = tokio::time::interval(LIVENESS_INTERVAL);
    let idle = shared.settings.idle_timeout;
    let watch_pid = session.target.pid.is_some();
    let mut moved = session.attach.moved_signal();
    let mut save = tokio::time::interval(SAVE_INTERVAL);
    let store = shared.state.as_deref();
    // What the session's shell sent to the browser: all of it now, then whatever comes.
    let mut offers = shared.offers.watch(&session.target.session);
    offers.mark_changed();
    // What programs printed that mosh-server drops (clipboard, notifications), from now on.
    let mut signals = shared.offers.signals(&session.target.session);
    let mut signals_open = true;
    // The links printed before this page attached (a reload, another browser).
    for link in shared.offers.links(&session.target.session) {
        if control.send.write_all(&ServerMessage::Signal(link).to_line()).await.is_err() {
            break;
        }
    }
    // A named token's link ends within a watch interval of `tern-relay token revoke`, or when
    // the token expires.
    let mut tokens = shared.tokens.changed();
    // How many watch (share links, read-only tokens): told to the page when it changes, and at
    // once when some watch already (a reload while sharing).
    let mut viewers = session.attach.viewers();
    if *viewers.borrow() > 0 {
        viewers.mark_changed();
    }
    let expires = shared.tokens.expires(&session.who).map(|at| {
        let left = at.saturating_sub(crate::tokens::unix_now());
        Instant::now() + Duration::from_secs(left)
    });
    let end = loop {
        let step = tokio::select! {
            d = conn.receive_datagram() => bridge.on_browser_datagram(d, &mut control.send).await,
            r = session.udp.recv(&mut buf) => {
                bridge.on_server_datagram(r.map(|n| &buf[..n]), &mut control.send).await
            }
            _ = sleep_until_some(bridge.hold.deadline()) => bridge.send_held(&mut control.send).await,
            m = control.reader.next_message() => bridge.on_control_message(m, &mut control.send).await,
            s = conn.accept_stream() => bridge.stream(s),
            _ = tokio::time::sleep_until(bridge.last_heard + idle) => ControlFlow::Break(End::ended(
                ErrorCode::IdleTimeout,
                format!("no datagram from the browser for {} s", idle.as_secs()),
            )),
            _ = liveness.tick(), if watch_pid => bridge.check_alive(),
            _ = moved.fired() => ControlFlow::Break(End::Moved),
            _ = offers.changed() => bridge.offer(&mut control.send).await,
            s = signals.recv(), if signals_open => {
                // Closed: the session's signals are gone (it ended); not polled again.
                signals_open = !matches!(s, Err(tokio::sync::broadcast::error::RecvError::Closed));
                bridge.signal(s, &mut control.send).await
            }
            _ = tokens.changed() => bridge.check_token(),
            Ok(()) = viewers.changed() => {
                let count = *viewers.borrow_and_update();
                let line = ServerMessage::Viewers { count }.to_line();
                if control.send.write_all(&line).await.is_err() {
                    ControlFlow::Break(End::BrowserGone("control stream closed"))
                } else {
                    ControlFlow::Continue(())
                }
            }
            _ = sleep_until_some(expires) => bridge.check_token_at(true),
            _ = save.tick(), if store.is_some() => {
                if let Some(store) = store {
                    session.attach.save(store, false);
                }
                ControlFlow::Continue(())
            }
        };
        if let ControlFlow::Break(end) = step {
            break end;
        }
    };
    if let Some(store) = store {
        session.attach.save(store, true);
    }
    if bridge.hold.batches > 0 {
        tracing::info!(session = %session.target.session, batches = bridge.hold.batches, datagrams = bridge.hold.datagrams, "server datagrams held as the page asked and sent together");
    }
    let (stale, after_move) = session.attach.dropped();
    if stale + after_move > 0 {
        tracing::info!(session = %session.target.session, stale, after_move, "client datagrams not forwarded (sequence number not above every earlier one, or sent after another page took over)");
    }
    end
}

/// The state of one session's forwarding.
struct Bridge<'a> {
    shared: &'a SessionContext,
    conn: &'a BrowserLink,
    session: &'a Attached,
    splitter: Splitter,
    /// Reused for each server datagram's framed parts.
    frames: Vec<Vec<u8>>,
    /// Browser → server datagrams per second.
    bucket: TokenBucket,
    last_heard: Instant,
    dropped_rate: u64,
    dropped_size: u64,
    last_warn: Option<Instant>,
    /// Offers this page has been sent (`tern send`, `tern open`).
    offered: std::collections::HashSet<String>,
    /// Server datagrams held as the page asked (hidden, or a long flood).
    hold: Hold,
    /// A read-only link's refusals: when each kind was last told and audited.
    refused: std::collections::HashMap<&'static str, Instant>,
    /// What this link's downloads and pictures learned of it, for the next one.
    link_memory: crate::send::SharedLinkMemory,
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
pub(super) async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl<'a> Bridge<'a> {
    fn new(shared: &'a SessionContext, conn: &'a BrowserLink, session: &'a Attached) -> Self {
        let cfg = &shared.settings;
        Bridge {
            shared,
            conn,
            session,
            splitter: Splitter::new(),
            frames: Vec::with_capacity(MAX_PARTS),
            bucket: TokenBucket::new(
                cfg.datagram_rate,
                cfg.datagram_burst,
                std::time::Instant::now(),
            ),
            last_heard: Instant::now(),
            dropped_rate: 0,
            dropped_size: 0,
            last_warn: None,
            offered: std::collections::HashSet::new(),
            hold: Hold::new(),
            refused: std::collections::HashMap::new(),
            link_memory: Default::default(),
        }
    }

    /// Who this link is, for the audit trail.
    fn audit_fields(&self) -> crate::audit::Fields {
        crate::audit::Fields::new()
            .who(self.session.who.name())
            .session(self.id())
            .link(self.conn.kind())
    }

    /// A read-only link asked for `what` (input, seed, answer): refused, told (`refused`) and
    /// audited, at most once per kind per [`WARN_INTERVAL`] (a page that typed keeps sending
    /// its input in every datagram).
    async fn refuse(&mut self, what: &'static str, send: &mut SendHalf) -> Step {
        let now = Instant::now();
        if self.refused.get(what).is_some_and(|t| now.duration_since(*t) < WARN_INTERVAL) {
            return ControlFlow::Continue(());
        }
        self.refused.insert(what, now);
        tracing::warn!(session = %self.id(), who = self.session.who.name(), what, "a read-only link's request refused");
        self.shared.audit.event("refused", &self.audit_fields().kind(what).reason("read-only"));
        let line =
            ServerMessage::Refused { what: what.into(), message: super::streams::READ_ONLY.into() }
                .to_line();
        if send.write_all(&line).await.is_err() {
            return ControlFlow::Break(End::BrowserGone("control stream closed"));
        }
        ControlFlow::Continue(())
    }

    /// The named tokens changed: this link ends if its token is gone.
    fn check_token(&self) -> Step {
        self.check_token_at(false)
    }

    /// `expiring`: the token's expiry time came.
    fn check_token_at(&self, expiring: bool) -> Step {
        if !expiring && self.shared.tokens.valid(&self.session.who) {
            return ControlFlow::Continue(());
        }
        let why = if expiring { "expired" } else { "revoked" };
        tracing::info!(session = %self.id(), who = self.session.who.name(), "the link's token was {why}; closing it");
        ControlFlow::Break(End::ended(
            ErrorCode::BadToken,
            format!("this link's token was {why}: ask the relay's owner for a new one"),
        ))
    }

    fn id(&self) -> &str {
        &self.session.target.session
    }

    /// A browser datagram: to mosh-server as it is, unless over the rate.
    async fn on_browser_datagram(&mut self, d: Option<Vec<u8>>, send: &mut SendHalf) -> Step {
        let Some(d) = d else {
            return ControlFlow::Break(End::BrowserGone("browser connection closed"));
        };
        self.last_heard = Instant::now();
        if !self.bucket.take(std::time::Instant::now()) {
            self.dropped_rate += 1;
            if self.last_warn.is_none_or(|t| t.elapsed() > WARN_INTERVAL) {
                self.last_warn = Some(Instant::now());
                tracing::warn!(session = %self.id(), dropped = self.dropped_rate, "browser over its datagram rate; dropping");
            }
            return ControlFlow::Continue(());
        }
        match self.session.attach.client_datagram(self.shared.state.as_deref(), &d) {
            Verdict::Forward => {}
            Verdict::Stale => return ControlFlow::Continue(()),
            Verdict::Moved => return ControlFlow::Break(End::Moved),
        }
        // A read-only link: acknowledgements pass (they keep the screen coming), input and
        // resizes do not.
        if self.session.who.read_only() && self.session.attach.refuse_input() {
            return self.refuse("input", send).await;
        }
        // Errors (e.g. ECONNREFUSED from an earlier ICMP) are transient for UDP.
        let _ = self.session.udp.send(&d).await;
        tracing::trace!(target: HOPS, len = d.len(), "browser → server");
        self.session.attach.after_forward();
        // The nonce's sequence number is in the clear: tests check that no number forwarded
        // repeats under a session's key across reloads, tabs and devices.
        if let Some(seq) = datagram_seq(&d) {
            tracing::trace!(target: SEQS, session = %self.id(), seq, "client datagram");
        }
        ControlFlow::Continue(())
    }

    /// A server datagram: framed to fit the browser's limit, or held as the page asked.
    async fn on_server_datagram(
        &mut self,
        received: std::io::Result<&[u8]>,
        control: &mut SendHalf,
    ) -> Step {
        let payload = match received {
            Ok(p) => p,
            Err(e) => {
                // ICMP port unreachable: mosh-server is not (or no longer) there.
                tracing::debug!(session = %self.id(), "udp recv: {e}");
                return self.check_alive();
            }
        };
        match self.hold.route(payload, Instant::now()) {
            Route::Send => {}
            Route::Held => {
                self.session.attach.server_datagram(payload);
                return ControlFlow::Continue(());
            }
            Route::SendBatch => {
                self.session.attach.server_datagram(payload);
                return self.send_held(control).await;
            }
        }
        self.frames.clear();
        let limit = datagram_limit(self.shared, self.conn, self.session.hello.max_datagram_size);
        if self.splitter.split(payload, limit, &mut self.frames).is_err() {
            self.dropped_size += 1;
            tracing::warn!(session = %self.id(), len = payload.len(), limit, dropped = self.dropped_size, "server datagram too large to frame; dropped");
            return ControlFlow::Continue(());
        }
        for f in &self.frames {
            if self.conn.send_datagram(f).is_err() {
                return ControlFlow::Break(End::BrowserGone("browser connection closed"));
            }
            tracing::trace!(target: HOPS, len = f.len(), "server → browser");
        }
        // The relay's copy after the page's: its work never delays a frame.
        self.session.attach.server_datagram(payload);
        ControlFlow::Continue(())
    }

    /// What is held for the page, as one control line.
    async fn send_held(&mut self, control: &mut SendHalf) -> Step {
        let datagrams = self.hold.take();
        if datagrams.is_empty() {
            return ControlFlow::Continue(());
        }
        tracing::trace!(target: HOPS, count = datagrams.len(), "server → browser, held");
        let line = ServerMessage::Held { datagrams }.to_line();
        if control.write_all(&line).await.is_err() {
            return ControlFlow::Break(End::BrowserGone("control stream closed"));
        }
        ControlFlow::Continue(())
    }

    /// A control message after `ready`.
    async fn on_control_message(
        &mut self,
        m: Result<ClientMessage, ReadError>,
        send: &mut SendHalf,
    ) -> Step {
        let end = match m {
            Ok(ClientMessage::Ping) => {
                if send.write_all(&ServerMessage::Pong.to_line()).await.is_ok() {
                    return ControlFlow::Continue(());
                }
                End::BrowserGone("control stream closed")
            }
            Ok(ClientMessage::Seed { .. }) if self.session.who.read_only() => {
                return self.refuse("seed", send).await;
            }
            Ok(ClientMessage::Answer { .. }) if self.session.who.read_only() => {
                return self.refuse("answer", send).await;
            }
            Ok(ClientMessage::Seed { point }) => {
                self.session.attach.seed(&point);
                return ControlFlow::Continue(());
            }
            Ok(ClientMessage::Hold { ms }) => {
                // What is held is due by the new time: the deadline's branch sends it.
                tracing::debug!(session = %self.id(), ms, "the page asks for datagrams held");
                self.hold.set_hold(ms);
                return ControlFlow::Continue(());
            }
            Ok(ClientMessage::Answer { id, answer }) => {
                tracing::info!(session = %self.id(), offer = %id, ?answer, "the page answered an offer");
                if let Err(e) = self.shared.offers.answer(self.id(), &id, answer) {
                    tracing::debug!(session = %self.id(), offer = %id, "answer: {e}");
                }
                return ControlFlow::Continue(());
            }
            Ok(ClientMessage::Hello(_) | ClientMessage::Greet { .. }) => {
                End::ended(ErrorCode::BadRequest, "hello sent twice")
            }
            Err(ReadError::Closed) | Err(ReadError::Io(_)) => {
                End::BrowserGone("browser closed the control stream")
            }
            Err(e @ ReadError::TooLarge) => End::ended(ErrorCode::MessageTooLarge, e.to_string()),
            Err(e @ ReadError::Malformed(_)) => End::ended(ErrorCode::BadRequest, e.to_string()),
        };
        ControlFlow::Break(end)
    }

    /// Every bidirectional stream after the control stream is one paste upload or one download.
    fn stream(&self, s: Option<(SendHalf, RecvHalf)>) -> Step {
        let Some((send, recv)) = s else {
            return ControlFlow::Break(End::BrowserGone("browser connection closed"));
        };
        // Spawns its task; the stream's first line says whether it is an upload or a download.
        let (fields, read_only) = (self.audit_fields(), self.session.who.read_only());
        let link = (self.conn.rtt(), std::sync::Arc::clone(&self.link_memory));
        super::streams::serve(
            self.shared,
            &self.session.target,
            send,
            recv,
            fields,
            read_only,
            link,
        );
        ControlFlow::Continue(())
    }

    /// Offers the page whatever the shell sent that this page has not been offered yet.
    async fn offer(&mut self, send: &mut SendHalf) -> Step {
        // What the shell sends is for whoever may act on it: a read-only link gets no offers.
        if self.session.who.read_only() {
            return ControlFlow::Continue(());
        }
        for offer in self.shared.offers.pending(self.id()) {
            if self.offered.contains(&offer.id) {
                continue;
            }
            if send.write_all(&ServerMessage::Offer(offer.clone()).to_line()).await.is_err() {
                return ControlFlow::Break(End::BrowserGone("control stream closed"));
            }
            self.offered.insert(offer.id);
        }
        ControlFlow::Continue(())
    }

    /// A clipboard write or notification a program printed, to a page that may act on it (a
    /// read-only link gets neither: the clipboard is the owner's, and so is the attention).
    async fn signal(
        &mut self,
        s: Result<PageSignal, tokio::sync::broadcast::error::RecvError>,
        send: &mut SendHalf,
    ) -> Step {
        let Ok(signal) = s else {
            // Lagged (more than the channel holds came at once) or closed (the session ended).
            return ControlFlow::Continue(());
        };
        // A link is text on the screen, for every page that shows it; the clipboard and
        // notifications are for the owner.
        if self.session.who.read_only() && !matches!(signal, PageSignal::Link { .. }) {
            return ControlFlow::Continue(());
        }
        if send.write_all(&ServerMessage::Signal(signal).to_line()).await.is_err() {
            return ControlFlow::Break(End::BrowserGone("control stream closed"));
        }
        ControlFlow::Continue(())
    }

    /// Ends the session when its spawned mosh-server is gone (and forgets its record).
    fn check_alive(&self) -> Step {
        if self.session.target.pid.is_none_or(pid_alive) {
            return ControlFlow::Continue(());
        }
        if let Some(state) = &self.shared.state {
            state.remove(self.id());
        }
        ControlFlow::Break(End::ended(
            ErrorCode::SessionEnded,
            "mosh-server exited (the shell ended)",
        ))
    }
}
