//! The end-to-end tests on the real default model (and the fuzz corpora's replay), one test
//! binary: linking and optimizing one binary per file cost CI minutes. A module per concern;
//! `cargo test --release -p companion-tests -- MODULE::` runs one of them.

mod agent_calls;
mod agent_loop;
mod bad_model_files;
mod conversations;
mod document_memory;
mod documents;
mod engine_recovery;
mod fuzz_corpus;
mod generation;
mod memory_guard;
mod pictures;
mod sessions;
mod thermal;
