//! Log setup that keeps secrets out: the relay's own events never carry tokens, keys or terminal
//! bytes, and wtransport's debug events (which print request headers, including a `?token=`
//! query) are cut off whatever `RUST_LOG` says.

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::{FilterExt, FilterFn};
use tracing_subscriber::layer::Filter;

/// Drops events of dependencies that may print request paths or headers below INFO.
pub fn redaction_filter() -> FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool + Clone> {
    FilterFn::new(|meta: &tracing::Metadata<'_>| {
        let noisy = meta.target().starts_with("wtransport") || meta.target().starts_with("h3");
        !(noisy && *meta.level() > Level::INFO)
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
