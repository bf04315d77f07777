//! Shared helpers for the end-to-end tests, which run on the real default model: the same ones
//! as the llama.cpp agreement tests' (`tests/agreement`), where they are defined.
pub use companion_agreement::*;
