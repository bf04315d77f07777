//! Which events are written: `COMPANION_LOG`, else `RUST_LOG` (both in `EnvFilter`'s syntax,
//! e.g. `debug` or `warn,engine=trace`), else info for our own crates and warnings for
//! everybody else's (a dependency's info lines are noise in a file a user sends us).

use tracing_subscriber::EnvFilter;

use crate::error::{Error, Result};

/// Our crates at info, the rest at warn.
pub const DEFAULT_DIRECTIVES: &str = "warn,engine=info,memory=info,chat=info,documents=info,agent=info,logging=info,companion=info,companion_app=info";

/// The filter the environment asks for, and a notice when what it asks cannot be read (the
/// defaults are used then: a typo in a variable must not silence the log).
pub fn from_env() -> (EnvFilter, Option<String>) {
    from_vars(
        std::env::var("COMPANION_LOG").ok(),
        std::env::var("RUST_LOG").ok(),
    )
}

fn from_vars(companion: Option<String>, rust: Option<String>) -> (EnvFilter, Option<String>) {
    let wanted = companion
        .filter(|v| !v.trim().is_empty())
        .or(rust.filter(|v| !v.trim().is_empty()));
    match wanted.map(|d| parse(&d)) {
        None => (default_filter(), None),
        Some(Ok(filter)) => (filter, None),
        Some(Err(e)) => (
            default_filter(),
            Some(format!("{e}; the default levels are used")),
        ),
    }
}

pub fn parse(directives: &str) -> Result<EnvFilter> {
    EnvFilter::try_new(directives).map_err(|e| Error::Filter {
        directives: directives.to_string(),
        reason: e.to_string(),
    })
}

fn default_filter() -> EnvFilter {
    EnvFilter::new(DEFAULT_DIRECTIVES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(f: &EnvFilter) -> String {
        f.to_string()
    }

    #[test]
    fn companion_log_wins_over_rust_log_and_both_over_the_default() {
        let (f, n) = from_vars(Some("debug".into()), Some("trace".into()));
        assert_eq!((shown(&f), n), ("debug".to_string(), None));
        let (f, _) = from_vars(None, Some("trace".into()));
        assert_eq!(shown(&f), "trace");
        let (f, _) = from_vars(Some(" ".into()), None);
        assert_eq!(shown(&f), shown(&default_filter()));
    }

    #[test]
    fn a_filter_that_cannot_be_read_falls_back_to_the_defaults_with_a_notice() {
        let (f, n) = from_vars(Some("engine=loud[".into()), None);
        assert_eq!(shown(&f), shown(&default_filter()));
        assert!(n.unwrap().contains("engine=loud["));
    }
}
