//! The conversation import target: see `checks/conversation_import.rs`.
#![no_main]

#[path = "../checks/conversation_import.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
