//! Which build this is: the package version and the commit it was built from (relay/build.rs
//! sets `TERN_RELAY_COMMIT`), for `--version`, `/api/info` and the page's settings panel.

/// The commit the relay was built from: a short hash, or `unknown`.
pub const COMMIT: &str = env!("TERN_RELAY_COMMIT");
/// What `tern-relay --version` prints after the name: the package version and the commit.
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TERN_RELAY_COMMIT"), ")");
