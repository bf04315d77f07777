//! The picture target: see `checks/picture.rs`.
#![no_main]

#[path = "../checks/picture.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
