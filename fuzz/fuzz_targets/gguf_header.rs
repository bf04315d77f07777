//! The GGUF header target: see `checks/gguf_header.rs`.
#![no_main]

#[path = "../checks/gguf_header.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
