//! Tern's mosh client core: sans-IO, the same code in the browser (wasm32) and natively.
//!
//! ```text
//!  browser driver (web/)      page::PageClient: session, link, pastes, downloads, draw pacing
//!  native driver, tern-probe        │ key, datagram, control line, link_up ─▶ poll_effect
//!    │ handle_datagram / handle_input / handle_resize / handle_timeout   ▲ poll_transmit
//!    ▼                                                                   │ poll_timeout/event
//!  session ── transport (SSP sender + receiver, RTT, timers) ── wire (OCB, fragments, zlib,
//!                 │                        │                          protobuf)
//!             user stream           server state (terminal model)
//! ```
//!
//! What the core does not do: open sockets, read a clock, draw randomness from the OS, or spawn
//! anything. Time comes in as [`time::Instant`] arguments, randomness from a seed.

pub mod download;
pub mod images;
pub mod page;
pub mod paste;
pub mod predict;
pub mod relay_client;
pub mod relay_proto;
pub mod session;
pub mod terminal;
pub mod time;
pub mod transfer;
pub mod transport;
pub mod wire;
