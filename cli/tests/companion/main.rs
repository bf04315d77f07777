//! The `companion` binary as a user meets it, one test binary (one link, one optimized build,
//! instead of one per file); a module per concern: `cargo test -p companion-cli --test companion -- MODULE::`.

mod api;
mod cli;
mod conversations;
mod kill;
mod log;
mod memory;
mod models;
mod summarize;
mod support;
mod sync;
mod tools;
mod vision;
