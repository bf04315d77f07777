//! The engine's public behaviour on the random-weight Gemma family fixtures, one test binary; a
//! module per concern: `cargo test -p companion-engine --test engine -- MODULE::`.

mod gemma_family;
mod profile;
mod snapshot_seed;
mod speculation;
