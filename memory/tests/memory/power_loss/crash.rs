//! The crash switch shared by the SQLite VFS shim and the snapshot file system: every write,
//! truncate, sync, rename or removal counts as one I/O operation; the one numbered
//! `crash_at` — and every one after it — fails as if the machine had lost power there.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static OPS: AtomicU64 = AtomicU64::new(0);
static CRASH_AT: AtomicU64 = AtomicU64::new(0);
static CRASHED: AtomicBool = AtomicBool::new(false);

/// Start counting from zero; crash at operation `at` (1-based), or never with `None`.
pub fn arm(at: Option<u64>) {
    OPS.store(0, Ordering::SeqCst);
    CRASHED.store(false, Ordering::SeqCst);
    CRASH_AT.store(at.unwrap_or(0), Ordering::SeqCst);
}

/// Operations counted since [`arm`].
pub fn ops() -> u64 {
    OPS.load(Ordering::SeqCst)
}

pub fn crashed() -> bool {
    CRASHED.load(Ordering::SeqCst)
}

/// Count one operation; true when it must fail (the power is gone).
pub fn tick() -> bool {
    if crashed() {
        return true;
    }
    let n = OPS.fetch_add(1, Ordering::SeqCst) + 1;
    if n == CRASH_AT.load(Ordering::SeqCst) {
        CRASHED.store(true, Ordering::SeqCst);
        return true;
    }
    false
}

/// A small seeded generator (xorshift64*), so every crash is reproducible from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    pub fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}
