//! Tern's cross-component test support: the link emulator (a UDP proxy, and a TUN link for any IP
//! traffic) and helpers for tests that drive real peers (mosh-server, mosh-client, tern-relay,
//! Chromium).

// Denied, not forbidden: one module (linkemu's TUN device) allows it for an ioctl and a poll.
#![deny(unsafe_code)]

pub mod linkemu;
pub mod mosh_client;
pub mod tools;
pub mod typing;
pub mod udp_echo;
