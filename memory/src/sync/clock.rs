//! Hybrid logical clocks (Kulkarni, Demirbas et al., "Logical Physical Clocks and Consistent
//! Snapshots in Globally Distributed Databases", 2014): a 64-bit value, milliseconds since the
//! Unix epoch shifted left by 16 bits plus a counter. A device's clock only moves forward:
//! every local change takes `max(clock + 1, now << 16)` (the schema's triggers do it in SQL),
//! every change received moves it to at least the received value. So a change made after
//! seeing another is always later than it, whatever the devices' wall clocks say, and a clock
//! stays within a few ticks of real time when the wall clocks agree.

use serde::{Deserialize, Serialize};

/// Bits of the counter below the milliseconds.
pub const COUNTER_BITS: u32 = 16;

/// A clock value beyond this is refused as corrupt: it is ~year 71,700, and leaves room to
/// count on without overflow.
pub const MAX_HLC: u64 = 1 << 62;

/// The clock value of `ms` milliseconds since the epoch, counter zero.
pub fn from_millis(ms: i64) -> u64 {
    (ms.max(0) as u64) << COUNTER_BITS
}

/// The wall-clock milliseconds of a clock value.
pub fn millis(hlc: u64) -> i64 {
    (hlc >> COUNTER_BITS) as i64
}

/// When and where a change was made: totally ordered by clock, then device id, so that
/// every device picks the same winner between two changes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    pub hlc: u64,
    pub device: String,
}

impl Stamp {
    pub fn new(hlc: u64, device: impl Into<String>) -> Self {
        Stamp {
            hlc,
            device: device.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_order_by_clock_then_device() {
        let a = Stamp::new(from_millis(10), "b");
        let b = Stamp::new(from_millis(10) + 1, "a");
        let c = Stamp::new(from_millis(10) + 1, "c");
        assert!(a < b && b < c);
        assert_eq!(millis(b.hlc), 10);
    }

    #[test]
    fn negative_times_clamp_to_the_epoch() {
        assert_eq!(from_millis(-5), 0);
    }
}
