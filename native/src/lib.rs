//! Native drivers (not in the browser build): the real mosh-server and a UDP loop for the core.
//!
//! Used by tests, benchmarks and `tern-probe`. These are the only parts of the crate that touch
//! processes, sockets and the clock.

mod client;
mod mosh_server;
pub mod probe;
pub mod script;

pub use client::NativeClient;
pub use mosh_server::{MoshServer, MoshServerOptions, StartError};
