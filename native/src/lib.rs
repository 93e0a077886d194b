//! Native drivers (not in the browser build): the real mosh-server and a UDP loop for the core.
//!
//! Used by tests, benchmarks, `tern-probe` and tern-relay (which starts mosh-server through
//! [`MoshServer::start`]). These are the only parts of Tern's client side that touch processes,
//! sockets and the clock.

mod client;
mod mosh_server;
pub mod probe;
pub mod script;

pub use client::{NativeClient, ResumeFailed};
pub use mosh_server::{
    Bind, DEFAULT_START_TIMEOUT, MoshServer, MoshServerOptions, ServerPort, StartError, shell_quote,
};
