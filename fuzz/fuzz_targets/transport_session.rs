//! The transport receiver fed authentic but hostile instructions: the server's side is played
//! by a PacketLayer holding the session key, so every datagram authenticates and everything
//! after the cipher (fragments, state numbers, diffs, parking, acks, shutdown) is the fuzzer's.
//! The same datagrams go to a relay's `Shadow` of the session, and the client's datagrams too.
//!
//! Input: a program of operations, each a byte then its arguments (see `Op` below).
//!
//! Invariants: no panic; every datagram handed over is counted (while the session is open);
//! only the garbage ones fail authentication; outcomes never outnumber the instructions that
//! could have produced them; the server screen and the displayed frame stay whole; the
//! shadow's resume point, when it has one, encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::session::ResumePoint;
use tern::session::{ClientSession, SessionConfig, Shadow};
use tern::terminal::Complete;
use tern::time::Instant;
use tern::wire::{
    Direction, Fragmenter, HostEvent, Instruction, MIN_MTU, PacketLayer, StateNum,
    encode_host_message,
};
use tern_fuzz::{Reader, check_framebuffer, key};

fn state(b: u8) -> StateNum {
    if b == 0xFF { StateNum::SHUTDOWN } else { StateNum(b.into()) }
}

struct Run {
    now: Instant,
    client: ClientSession<Complete>,
    shadow: Shadow,
    server: PacketLayer,
    delivered: u64,
    garbage: u64,
}

impl Run {
    fn deliver(&mut self, datagram: &[u8]) {
        if !self.client.is_closed() {
            self.delivered += 1;
        }
        self.client.handle_datagram(self.now, datagram);
        self.shadow.server_datagram(self.now, datagram);
    }

    fn seal(&mut self, payload: &[u8]) -> Vec<u8> {
        self.server.seal(self.now, payload).expect("sequence numbers left")
    }

    fn drain(&mut self) {
        while let Some(datagram) = self.client.poll_transmit() {
            self.shadow.client_datagram(self.now, &datagram);
        }
        while self.client.poll_event().is_some() {}
    }

    fn check(&mut self) {
        let c = self.client.counters().clone();
        if !self.client.is_closed() {
            assert_eq!(c.datagrams_in, self.delivered, "datagrams counted");
        }
        assert!(c.auth_failures <= self.garbage, "authentic datagrams refused: {c:?}");
        let authentic = c.datagrams_in - c.auth_failures;
        assert!(c.malformed <= authentic, "{c:?}");
        let outcomes = c.applied
            + c.duplicates
            + c.parked
            + c.stale
            + c.dropped_unknown_base
            + c.lost_base
            + c.acks_on_unknown_base
            + c.refused_older_base
            + c.quenched
            + c.apply_failures;
        // A parked instruction is booked twice: parked, then what became of it.
        assert!(outcomes <= authentic - c.malformed + c.parked, "{c:?}");
        check_framebuffer(self.client.server_state().framebuffer());
        if let Some(frame) = self.client.display_frame() {
            check_framebuffer(&frame);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let key = key();
    let start = Instant::from_millis(1_000);
    let mut run = Run {
        now: start,
        client: ClientSession::new(SessionConfig::new(key.clone(), 80, 24), start),
        shadow: Shadow::new(&key, start),
        server: PacketLayer::new(&key, Direction::ToClient),
        delivered: 0,
        garbage: 0,
    };
    run.drain();
    let mut r = Reader(data);
    let mut steps = 0;
    while !r.is_empty() && steps < 200 {
        steps += 1;
        match r.u8() % 8 {
            // An instruction, fragmented at some MTU and delivered in some order.
            0 | 1 => {
                let (old, new, ack, throwaway) = (r.u8(), r.u8(), r.u8(), r.u8());
                let kind = r.u8();
                let diff = match kind % 3 {
                    0 => r.short().to_vec(),
                    1 => {
                        let mut events = vec![HostEvent::Bytes(r.short().to_vec())];
                        if kind & 0x10 != 0 {
                            let (cols, rows) = (r.u8(), r.u8());
                            events.insert(
                                0,
                                HostEvent::Resize { cols: cols.into(), rows: rows.into() },
                            );
                        }
                        if kind & 0x20 != 0 {
                            events.insert(0, HostEvent::EchoAck(StateNum(r.u8().into())));
                        }
                        encode_host_message(&events)
                    }
                    _ => Vec::new(),
                };
                let instruction = Instruction {
                    old_num: state(old),
                    new_num: state(new),
                    ack_num: state(ack),
                    throwaway_num: state(throwaway),
                    diff,
                    chaff: Vec::new(),
                };
                let mtu = MIN_MTU + usize::from(r.u8()) * 5;
                let delivery = r.u8();
                let mut fragmenter = Fragmenter::with_next_id(mtu, u64::from(delivery >> 4));
                let Ok(mut fragments) = fragmenter.fragment(&instruction) else { continue };
                if delivery & 1 != 0 {
                    fragments.reverse();
                }
                if delivery & 2 != 0 {
                    fragments.push(fragments[0].clone());
                }
                if delivery & 4 != 0 && fragments.len() > 1 {
                    fragments.pop();
                }
                for fragment in fragments {
                    let datagram = run.seal(&fragment);
                    run.deliver(&datagram);
                }
            }
            // Authentic bytes that need not be a fragment at all.
            2 => {
                let payload = r.short().to_vec();
                let datagram = run.seal(&payload);
                run.deliver(&datagram);
            }
            // Garbage: fails authentication.
            3 => {
                let datagram = r.short().to_vec();
                run.garbage += 1;
                run.deliver(&datagram);
            }
            4 => {
                let keys = r.short();
                run.client.handle_input(run.now, keys);
            }
            5 => {
                run.now = Instant::from_millis(run.now.as_millis() + u64::from(r.u8()) * 4);
                run.client.handle_timeout(run.now);
            }
            6 => {
                let (cols, rows) = tern_fuzz::size(r.u8(), r.u8());
                run.client.handle_resize(run.now, cols, rows);
            }
            _ => {
                if r.u8() == 0xFF {
                    run.client.shutdown(run.now);
                }
            }
        }
        run.drain();
        run.check();
    }
    if let Ok(point) = run.shadow.resume_point() {
        let decoded = ResumePoint::decode(&point.encode()).expect("a shadow's point decodes");
        assert!(decoded == point, "resume point round trip");
        if let Ok(screen) = point.server_state() {
            check_framebuffer(screen.framebuffer());
        }
    }
});
