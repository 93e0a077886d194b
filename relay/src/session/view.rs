//! A viewer's link (a share link, a read-only token, or a page that asked to watch): the
//! session's screen from the relay's copy ([`crate::registry::Watch`]), rendered for it by the
//! core ([`tern::session::ViewerFeed`]), never mosh. The link gets no key and no datagram; it is
//! not a client of the mosh-server, so it cannot move the session from the page that drives it.
//! A picture of its session (docs/IMAGES.md) is served when it may have them
//! ([`Viewing::pictures`]); whatever else it sends besides pings is refused, told and audited (at most once per kind per
//! [`WARN_INTERVAL`]), as for a read-only driver in `forward.rs`.
//!
//! A read-only link is always a viewer, and a viewer only ever attaches to a session that runs:
//! a read-only token cannot start a session (nor take one over).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use tern::relay_proto::{Mode, PageSignal};
use tern::session::ViewerFeed;
use tokio::io::AsyncWriteExt;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::SessionContext;
use super::forward::End;
use super::forward::sleep_until_some;
use super::handshake::{Control, Refusal};
use crate::control::{ClientMessage, ErrorCode, Hello, MAX_SESSION_MESSAGE, ReadError, Ready};
use crate::control::{FRAMING_VERSION, ServerMessage};
use crate::link::{BrowserLink, SendHalf};
use crate::registry::Watch;
use crate::state::{SessionRecord, pid_alive};
use crate::tokens::{OWNER, Share, Who};

/// At most one refusal of each kind per this interval is told and audited.
const WARN_INTERVAL: Duration = Duration::from_secs(10);
/// How often the watched session's mosh-server is checked.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(2);

/// What a viewer is told when it types, resizes, pastes or downloads.
pub(super) const VIEW_ONLY: &str = "this link is read-only (it watches the session): typing, \
                                    resizing, pasting and downloads are refused";
/// What a read-only link asking for a new session is told.
pub(super) const NO_NEW_SESSION: &str = "This link is read-only: it can watch a running \
                                         session, not start one. Open the link you were given: \
                                         it names the session.";
/// What a share link is told about any session but its own.
pub(super) const OTHER_SESSION: &str = "this share link is for another session";

/// An admitted viewer, before its `ready`.
pub(super) struct Viewing {
    pub hello: Hello,
    pub who: Who,
    pub share: Option<Share>,
    pub record: SessionRecord,
    pub watch: Watch,
    /// Whether it gets the session's pictures (docs/IMAGES.md): a share that includes the
    /// history, or a token that may read the session's history over HTTP. Without them its
    /// screen's image markers are blanked and a picture it asks for is refused.
    pub pictures: bool,
    /// The `--max-sessions` slot, released when the viewer goes.
    pub _slot: OwnedSemaphorePermit,
}

/// Whether this admitted hello is a viewer's: it asked to watch, or its token is read-only.
pub(super) fn is_viewer(hello: &Hello, who: &Who) -> bool {
    hello.view || who.read_only()
}

/// Finds the session a viewer may watch: a running one, its share's, its own or (for a
/// read-only token) the owner's.
pub(super) fn admit(
    shared: &SessionContext,
    hello: Hello,
    who: Who,
    slot: OwnedSemaphorePermit,
) -> Result<Viewing, Refusal> {
    let state = match (shared.settings.mode, &shared.state) {
        (Mode::Spawn, Some(state)) => state,
        _ => {
            return Err(Refusal::new(
                ErrorCode::BadRequest,
                "this relay keeps no copy of its sessions (bridge mode): there is nothing to \
                 watch, and a read-only link cannot drive one",
            ));
        }
    };
    let Some(id) = hello.resume.clone() else {
        return Err(Refusal::new(ErrorCode::BadRequest, NO_NEW_SESSION));
    };
    let share = shared.tokens.share(&who);
    if share.as_ref().is_some_and(|s| s.session != id) {
        return Err(Refusal::new(ErrorCode::NotYourSession, OTHER_SESSION));
    }
    let record = state.check_alive(&id).ok_or_else(|| {
        Refusal::new(ErrorCode::SessionEnded, "that session is over (its shell exited)")
    })?;
    // A share watches its session; a read-only token its own and the owner's (the relay's
    // owner gave it); anyone else (a page that asked to watch) what it may open.
    let owner = record.owner_name();
    let allowed = share.is_some()
        || who.may_use(owner)
        || (who.read_only() && matches!(who, Who::Named { .. }) && owner == OWNER);
    if !allowed {
        return Err(Refusal::new(ErrorCode::NotYourSession, super::NOT_YOURS));
    }
    let watch = shared.registry.watch(state, &record).ok_or_else(|| {
        Refusal::new(ErrorCode::Internal, "the relay has no copy of that session's screen")
    })?;
    // The pictures go with the history: the same rule as `/api/history` and `/api/image`.
    let pictures = share.as_ref().map_or_else(|| who.may_use(owner), |s| s.allow_history);
    Ok(Viewing { hello, who, share, record, watch, pictures, _slot: slot })
}

/// Serves an admitted viewer until it goes, its token ends, or the session does.
pub(super) async fn serve(
    shared: &SessionContext,
    conn: &BrowserLink,
    control: &mut Control,
    v: Viewing,
    peer: SocketAddr,
    agent: Option<&str>,
) {
    let limit = super::forward::datagram_limit(shared, conn, v.hello.max_datagram_size);
    let ready = ServerMessage::Ready(Ready {
        session: v.record.id.clone(),
        mode: Mode::Spawn,
        port: 0,
        key: None,
        max_datagram_size: limit,
        framing: FRAMING_VERSION,
        resumed: true,
        seq_floor: 0,
        point: None,
        view: true,
        owner: Some(v.record.owner_name().to_string()),
        off: None,
        info: Some(Box::new(shared.relay_info())),
    });
    if control.send.write_all(&ready.to_line()).await.is_err() {
        return;
    }
    control.reader.set_limit(MAX_SESSION_MESSAGE);
    let span = tracing::info_span!("viewer", id = %v.record.id, %peer);
    tracing::info!(parent: &span, who = v.who.name(), share = v.share.is_some(), link = conn.kind(), "watching");
    let fields = || {
        crate::audit::Fields::new()
            .who(v.who.name())
            .addr(peer.ip())
            .agent(agent)
            .session(&v.record.id)
            .link(conn.kind())
    };
    shared.audit.event(
        "viewer_joined",
        &fields().kind(if v.share.is_some() { "share" } else { "read-only" }),
    );
    let mut viewer = Viewer {
        shared,
        conn,
        v: &v,
        refused: HashMap::new(),
        fields: fields(),
        link_memory: Default::default(),
    };
    let end = viewer.run(control).await;
    let reason = match &end {
        End::Ended { code, .. } => code.as_str(),
        End::BrowserGone(why) => why,
        End::Moved => "moved",
    };
    shared.audit.event("viewer_left", &fields().reason(reason));
    super::say_goodbye(&mut control.send, end, &span).await;
    conn.close(0, "viewing over");
}

struct Viewer<'a> {
    shared: &'a SessionContext,
    conn: &'a BrowserLink,
    v: &'a Viewing,
    /// When each kind of refusal was last told.
    refused: HashMap<&'static str, Instant>,
    fields: crate::audit::Fields,
    /// What the link's earlier picture streams learned of it (as a driver's, `forward.rs`).
    link_memory: crate::send::SharedLinkMemory,
}

type Step = ControlFlow<End>;

impl Viewer<'_> {
    async fn run(&mut self, control: &mut Control) -> End {
        let epoch = Instant::now();
        let core_now = || tern::time::Instant::from_micros(epoch.elapsed().as_micros() as u64);
        let mut feed = ViewerFeed::new();
        let mut screen = self.v.watch.screen.clone();
        let mut tokens = self.shared.tokens.changed();
        let expires = self.shared.tokens.expires(&self.v.who).map(|at| {
            let left = at.saturating_sub(crate::tokens::unix_now());
            Instant::now() + Duration::from_secs(left)
        });
        let mut liveness = tokio::time::interval(LIVENESS_INTERVAL);
        // Links (OSC 8) are text on the screen: a viewer gets them as the owner's page does, those
        // printed before it came first. Never the clipboard or notifications: they are the owner's.
        let session = self.v.record.id.clone();
        let mut signals = self.shared.offers.signals(&session);
        let mut signals_open = true;
        for link in self.shared.offers.links(&session) {
            if let ControlFlow::Break(end) =
                write(&mut control.send, &ServerMessage::Signal(link).to_line()).await
            {
                return end;
            }
        }
        loop {
            let due = feed.deadline().map(|at| epoch + Duration::from_micros(at.as_micros()));
            let step = tokio::select! {
                r = screen.changed() => {
                    if r.is_err() {
                        return End::ended(ErrorCode::SessionEnded, "the session is over");
                    }
                    feed.changed();
                    ControlFlow::Continue(())
                }
                _ = sleep_until_some(due) => match self.snapshot() {
                    Some(fb) => match feed.poll(core_now(), &fb) {
                        Some(u) => {
                            let line = ServerMessage::Screen {
                                cols: u.cols,
                                rows: u.rows,
                                full: u.full,
                                data: u.data,
                            }
                            .to_line();
                            write(&mut control.send, &line).await
                        }
                        None => ControlFlow::Continue(()),
                    },
                    // No copy to show yet (a relay restarted without one): until the owner's
                    // page seeds it.
                    None => {
                        feed.wait();
                        ControlFlow::Continue(())
                    }
                },
                d = self.conn.receive_datagram() => match d {
                    None => ControlFlow::Break(End::BrowserGone("browser connection closed")),
                    Some(_) => self.refuse("input", &mut control.send).await,
                },
                m = control.reader.next_message() => self.on_control(m, &mut control.send).await,
                s = self.conn.accept_stream() => match s {
                    None => ControlFlow::Break(End::BrowserGone("browser connection closed")),
                    Some((send, recv)) => {
                        let (audit, fields) = (Arc::clone(&self.shared.audit), self.fields.clone());
                        let pictures = self.shared.state.clone().filter(|_| self.v.pictures);
                        let offers = Arc::clone(&self.shared.offers);
                        let pictures = pictures.map(|state| (state, offers, session.clone()));
                        let link = (self.conn.rtt(), Arc::clone(&self.link_memory));
                        tokio::spawn(async move {
                            super::streams::serve_viewer((send, recv), &audit, fields, pictures, link)
                                .await
                        });
                        ControlFlow::Continue(())
                    }
                },
                s = signals.recv(), if signals_open => match s {
                    Ok(link @ PageSignal::Link { .. }) => {
                        write(&mut control.send, &ServerMessage::Signal(link).to_line()).await
                    }
                    // The session's signals are gone (it ended): not polled again.
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        signals_open = false;
                        ControlFlow::Continue(())
                    }
                    _ => ControlFlow::Continue(()),
                },
                _ = tokens.changed() => self.check_token(false),
                _ = sleep_until_some(expires) => self.check_token(true),
                _ = liveness.tick() => self.check_alive(),
            };
            if let ControlFlow::Break(end) = step {
                return end;
            }
        }
    }

    async fn on_control(
        &mut self,
        m: Result<ClientMessage, ReadError>,
        send: &mut SendHalf,
    ) -> Step {
        match m {
            Ok(ClientMessage::Ping) => write(send, &ServerMessage::Pong.to_line()).await,
            // Nothing is held for a viewer: its updates are coalesced already.
            Ok(ClientMessage::Hold { .. }) => ControlFlow::Continue(()),
            Ok(ClientMessage::Seed { .. }) => self.refuse("seed", send).await,
            Ok(ClientMessage::Answer { .. }) => self.refuse("answer", send).await,
            Ok(ClientMessage::Hello(_) | ClientMessage::Greet { .. }) => {
                ControlFlow::Break(End::ended(ErrorCode::BadRequest, "hello sent twice"))
            }
            Err(ReadError::Closed) | Err(ReadError::Io(_)) => {
                ControlFlow::Break(End::BrowserGone("browser closed the control stream"))
            }
            Err(e @ ReadError::TooLarge) => {
                ControlFlow::Break(End::ended(ErrorCode::MessageTooLarge, e.to_string()))
            }
            Err(e @ ReadError::Malformed(_)) => {
                ControlFlow::Break(End::ended(ErrorCode::BadRequest, e.to_string()))
            }
        }
    }

    /// A viewer asked for `what`: refused, told and audited (at most once per kind per
    /// [`WARN_INTERVAL`]: a page that typed may go on sending).
    async fn refuse(&mut self, what: &'static str, send: &mut SendHalf) -> Step {
        let now = Instant::now();
        if self.refused.get(what).is_some_and(|t| now.duration_since(*t) < WARN_INTERVAL) {
            return ControlFlow::Continue(());
        }
        self.refused.insert(what, now);
        tracing::warn!(session = %self.v.record.id, who = self.v.who.name(), what, "a viewer's request refused (read-only link's request refused)");
        self.shared.audit.event("refused", &self.fields.clone().kind(what).reason("read-only"));
        let line =
            ServerMessage::Refused { what: what.into(), message: VIEW_ONLY.into() }.to_line();
        write(send, &line).await
    }

    /// The session's screen from the relay's copy; without the pictures its image markers
    /// blanked: not even where the pictures are, nor their ids.
    fn snapshot(&self) -> Option<tern::terminal::Framebuffer> {
        let mut fb = self.v.watch.snapshot()?;
        if !self.v.pictures {
            tern::images::marker::hide(&mut fb);
        }
        Some(fb)
    }

    /// The token was revoked (a share ended) or expired: the viewer goes.
    fn check_token(&self, expiring: bool) -> Step {
        if !expiring && self.shared.tokens.valid(&self.v.who) {
            return ControlFlow::Continue(());
        }
        let message = match (&self.v.share, expiring) {
            (Some(_), true) => "This share link expired: the session is no longer shared with you.",
            (Some(_), false) => "The session's owner ended sharing: this link no longer shows it.",
            (None, true) => "This link's token expired: ask the relay's owner for a new one.",
            (None, false) => "This link's token was revoked: ask the relay's owner for a new one.",
        };
        tracing::info!(session = %self.v.record.id, who = self.v.who.name(), "{message}");
        ControlFlow::Break(End::ended(ErrorCode::BadToken, message))
    }

    /// The watched session's mosh-server is gone: so is the viewer.
    fn check_alive(&self) -> Step {
        if self.v.record.pid.is_none_or(pid_alive) {
            return ControlFlow::Continue(());
        }
        ControlFlow::Break(End::ended(ErrorCode::SessionEnded, "the shell ended"))
    }
}

async fn write(send: &mut SendHalf, line: &[u8]) -> Step {
    if send.write_all(line).await.is_err() {
        return ControlFlow::Break(End::BrowserGone("control stream closed"));
    }
    ControlFlow::Continue(())
}
