//! The agent crate's public behaviour, one test binary (one link, one optimized build, instead of
//! one per file); a module per concern: `cargo test -p companion-agent --test agent -- MODULE::`.

mod approval;
mod calls;
mod common;
mod large_file;
mod sandbox;
mod tools;
