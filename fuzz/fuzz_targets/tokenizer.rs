//! The tokenizer target: see `checks/tokenizer.rs`.
#![no_main]

#[path = "../checks/tokenizer.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
