//! Log setup that keeps secrets out: the relay's own events never carry tokens, keys or terminal
//! bytes, and every dependency is capped at INFO whatever `RUST_LOG` says: below that, libraries
//! print what passes through them (wtransport request headers, tungstenite every WebSocket frame
//! in hex: the token in the hello, the mosh key in `ready`, the screen in `seed`), which must
//! never reach a journal.

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::{FilterExt, FilterFn};
use tracing_subscriber::layer::Filter;

/// The targets that may log below INFO: the relay's own code, whose events are written to carry
/// no secret.
const OWN_TARGETS: [&str; 3] = ["tern_relay", "tern_native", "tern"];

/// Whether `target` is one of [`OWN_TARGETS`] or a module of one.
fn is_own(target: &str) -> bool {
    OWN_TARGETS.iter().any(|own| {
        target.strip_prefix(own).is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

/// Drops every event below INFO that is not the relay's own (a dependency's debug and trace
/// events print request paths, headers and frame payloads).
pub fn redaction_filter() -> FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool + Clone> {
    FilterFn::new(|meta: &tracing::Metadata<'_>| {
        *meta.level() <= Level::INFO || is_own(meta.target())
    })
}

/// `RUST_LOG` (or `default`) combined with [`redaction_filter`].
pub fn filter<S>(default: &str) -> impl Filter<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let env = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    env.and(redaction_filter())
}

/// Installs the global subscriber for the binary: human-readable lines on stderr.
pub fn init() {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in log files or journald.
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter("info,quinn=warn"));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

#[cfg(test)]
mod tests {
    use super::is_own;

    #[test]
    fn only_the_relays_own_targets_may_log_below_info() {
        for own in ["tern_relay", "tern_relay::http", "tern", "tern::session", "tern_native"] {
            assert!(is_own(own), "{own}");
        }
        for other in [
            "tungstenite::protocol",
            "tokio_tungstenite",
            "hyper",
            "h3",
            "wtransport",
            "quinn",
            "rustls",
            "log",
            "ternary",
            "tern_relayx",
        ] {
            assert!(!is_own(other), "{other}");
        }
    }
}
