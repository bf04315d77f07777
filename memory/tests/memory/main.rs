//! The memory crate's public behaviour, one test binary (one link, one optimized build, instead of
//! one per file); a module per concern: `cargo test -p companion-memory --test memory -- MODULE::`.
//! The schema fixtures stay in `tests/fixtures/`.

mod agent_tables;
mod compaction;
mod documents;
mod images;
mod power_loss;
mod search_export;
mod store;
mod sync;
