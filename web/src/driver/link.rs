//! One attempt to reach the relay (`Effect::Connect`), and the link it opened while it lives:
//! its datagrams and its control lines go to the client.

use std::rc::{Rc, Weak};

use tern::page::{LinkId, LinkUp};

use super::Driver;
use crate::clock::now;
use crate::relay_link::{self, RelayLink};
use crate::storage;

impl Driver {
    /// `/api/info`, the link (WebTransport or the WebSocket fallback), `hello` and `ready`;
    /// then the link is served until it ends.
    pub(super) async fn connect(self: Rc<Self>) {
        let token = self.client.borrow().target().token.clone();
        // The early link whose relay proved the token with its pushed challenge before the info
        // came needs no info to be trusted: its hello leaves now, in the mode the page's address
        // implies, and the answer is read once the info is in.
        let sent = relay_link::take_proven_early_link(&token, self.wt_port).await.map(|proven| {
            let mode = self.client.borrow().mode_before_info();
            proven.send_hello(&token, |max| self.client.borrow().hello(mode, max))
        });
        // Its `ready` carries the relay's info: then the session is served at once, with no
        // wait for `/api/info` (whose answer, asked for as the page wired itself up, is let go).
        let (sent, answered) = match sent {
            Some(Ok(sent)) => {
                let hello_sent = now();
                match sent.answer().await {
                    Ok((link, mut ready)) => match ready.info.take() {
                        Some(info) => {
                            relay_link::forget_early_info();
                            return self.ready_with_info(link, ready, &info, hello_sent).await;
                        }
                        // A relay older than the field: the info decides as before.
                        None => (None, Some(Ok((link, ready)))),
                    },
                    // A refusal: the info's verdict first, as below.
                    Err(e) => (None, Some(Err(e))),
                }
            }
            other => (other, None),
        };
        // The page may have asked already, while it built the terminal.
        let (asked, info) = match relay_link::take_early_info(&token).await {
            Some(early) => early,
            None => (now(), relay_link::fetch_info(&token).await),
        };
        // The info's verdict first: a relay this page cannot use says so better than its
        // refusal of an early hello (another mode, another version).
        let checked = info.and_then(|info| {
            crate::clock::mark_once("tern:info");
            let patience = self.call(|c, now| c.info(now, asked, &info))?;
            Ok((info, patience))
        });
        let (info, patience) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                if let Some(Ok((link, _))) = &answered {
                    link.close();
                }
                return self.call(|c, now| c.connect_failed(now, e));
            }
        };
        let opened = match (answered, sent) {
            (Some(answered), _) => answered,
            (None, Some(Err(e))) => Err(e),
            _ => {
                let port = self.wt_port.unwrap_or(info.port);
                RelayLink::open(&info, port, &token, patience, |max| {
                    self.client.borrow().hello(info.mode, max)
                })
                .await
            }
        };
        match opened {
            Ok((link, ready)) => self.link_opened(link, ready).await,
            Err(e) => self.call(|c, now| c.connect_failed(now, e)),
        }
    }

    /// An early hello's `ready` with the relay's info in it: the info's verdict, as `/api/info`'s
    /// would be, then the link.
    async fn ready_with_info(
        self: Rc<Self>,
        link: RelayLink,
        ready: tern::relay_proto::control::Ready,
        info: &tern::relay_proto::RelayInfo,
        hello_sent: tern::time::Instant,
    ) {
        crate::clock::mark_once("tern:info");
        match self.call(|c, now| c.info(now, hello_sent, info)) {
            Ok(_) => self.link_opened(link, ready).await,
            Err(e) => {
                link.close();
                self.call(|c, now| c.connect_failed(now, e))
            }
        }
    }

    /// A link the relay answered `ready` on: the client's from now, served until it ends.
    async fn link_opened(
        self: Rc<Self>,
        link: RelayLink,
        ready: tern::relay_proto::control::Ready,
    ) {
        let link = Rc::new(link);
        let up =
            LinkUp { kind: link.kind(), max_datagram_size: link.max_datagram_size, ready: &ready };
        let id = self.client.borrow_mut().link_up(now(), up, &storage::kept_nonces);
        match id {
            Some(id) => {
                // The link is the driver's before the client's first effects for it are done.
                *self.link.borrow_mut() = Some((id, Rc::clone(&link)));
                self.drain();
                self.serve(id, link).await;
            }
            None => {
                link.close();
                self.drain();
            }
        }
    }

    /// Runs one live link: datagrams here, control lines beside; tells the client when the
    /// link is gone.
    async fn serve(self: &Rc<Self>, id: LinkId, link: Rc<RelayLink>) {
        wasm_bindgen_futures::spawn_local(Driver::read_control(
            Rc::downgrade(self),
            id,
            Rc::clone(&link),
        ));
        let mut first = true;
        while let Some(d) = link.next_datagram().await {
            if std::mem::take(&mut first) {
                crate::clock::mark_once("tern:datagram");
            }
            self.call(|c, now| c.datagram(now, &d));
        }
        link.close();
        {
            let mut current = self.link.borrow_mut();
            if current.as_ref().is_some_and(|(current, _)| *current == id) {
                *current = None;
            }
        }
        self.call(|c, now| c.link_lost(now, id));
    }

    async fn read_control(driver: Weak<Driver>, id: LinkId, link: Rc<RelayLink>) {
        loop {
            let line = link.next_control().await;
            let Some(d) = driver.upgrade() else { return };
            if !d.call(|c, now| c.control_line(now, id, line.as_deref())) {
                return link.close();
            }
        }
    }
}
