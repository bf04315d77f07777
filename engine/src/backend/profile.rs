//! Where a forward pass spends its time, per operation of the backend interface: every
//! operation [`super::Counting`] counts is also timed, keyed by what it is (a matrix product by
//! its weight's format and shape, attention by its kind of layer). `companion bench --profile`
//! prints the table for a decode token and a prefill chunk — the per-op profile that
//! llama.cpp's `GGML_SCHED` / perf breakdown gives for its graph.
//!
//! On the host backend every operation returns when its work is done, so the times are the
//! work's. On a GPU an operation returns once it is queued: the times are then the host's cost
//! of dispatching it, not the kernel's.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// What was run: an operation and, where it has them, the weight's format and `[n, k]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct OpKey {
    pub op: &'static str,
    pub format: &'static str,
    pub shape: (usize, usize),
}

impl OpKey {
    pub fn op(op: &'static str) -> Self {
        OpKey {
            op,
            format: "",
            shape: (0, 0),
        }
    }

    fn label(&self) -> String {
        match self.shape {
            (0, 0) if self.format.is_empty() => self.op.to_string(),
            (0, 0) => format!("{} {}", self.op, self.format),
            (n, k) => format!("{} {} {n}×{k}", self.op, self.format),
        }
    }
}

/// Calls and nanoseconds per operation, since the model was loaded.
#[derive(Debug, Default)]
pub(crate) struct OpProfile {
    totals: Mutex<BTreeMap<OpKey, (u64, u64)>>,
}

/// The totals at one moment; [`ProfileSnapshot::since`] turns two of them into a profile.
#[derive(Debug, Clone, Default)]
pub struct ProfileSnapshot(BTreeMap<OpKey, (u64, u64)>);

/// One line of a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpTime {
    /// The operation, e.g. `matmul q4_k 6144×1536` or `attention sliding`.
    pub op: String,
    pub calls: u64,
    pub seconds: f64,
}

impl OpProfile {
    /// Runs `f`, adding its time to `key`'s line.
    pub fn time<T>(&self, key: OpKey, f: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let out = f();
        let nanos = t0.elapsed().as_nanos() as u64;
        let mut totals = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        let line = totals.entry(key).or_default();
        line.0 += 1;
        line.1 += nanos;
        out
    }

    pub fn snapshot(&self) -> ProfileSnapshot {
        ProfileSnapshot(
            self.totals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

impl ProfileSnapshot {
    /// What ran between `earlier` and this snapshot, the most time first.
    pub fn since(&self, earlier: &ProfileSnapshot) -> Vec<OpTime> {
        let mut lines: Vec<OpTime> = self
            .0
            .iter()
            .filter_map(|(key, &(calls, nanos))| {
                let (c0, n0) = earlier.0.get(key).copied().unwrap_or_default();
                (calls > c0).then(|| OpTime {
                    op: key.label(),
                    calls: calls - c0,
                    seconds: nanos.saturating_sub(n0) as f64 * 1e-9,
                })
            })
            .collect();
        lines.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_holds_what_ran_between_two_snapshots() {
        let p = OpProfile::default();
        let mm = OpKey {
            op: "matmul",
            format: "q4_k",
            shape: (8, 4),
        };
        p.time(OpKey::op("add"), || ());
        let before = p.snapshot();
        p.time(mm, || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        p.time(mm, || ());
        p.time(OpKey::op("rope"), || ());
        let lines = p.snapshot().since(&before);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].op, "matmul q4_k 8×4");
        assert_eq!(lines[0].calls, 2);
        assert!(lines[0].seconds >= 0.002);
        assert_eq!(lines[1].op, "rope");
        assert_eq!(lines[1].calls, 1);
    }
}
