//! The snapshot restore target: see `checks/snapshot_restore.rs`.
#![no_main]

#[path = "../checks/snapshot_restore.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
