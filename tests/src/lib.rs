//! Tern's cross-component test support: the UDP link emulator and helpers for tests that drive
//! real peers (mosh-server, mosh-client, tern-relay, Chromium).

#![forbid(unsafe_code)]

pub mod linkemu;
pub mod mosh_client;
pub mod tools;
pub mod typing;
