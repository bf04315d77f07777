//! The caps on what tools read — per call, per search and per turn — and the per-turn budget
//! the caller resets at each user message. Every tool that reaches a cap says so in its
//! result (`truncated`, and a sentence in the text) rather than silently returning less.
//! The defaults fit a small model's context: one read is about a thousand tokens, and a
//! search reads at most as much as a few books.

use std::sync::atomic::{AtomicU64, Ordering};

/// The caps. [`Limits::default`] is what the app and the CLI use; tests lower them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Text `read_file` returns when no `length` is given, in bytes.
    pub read_default_bytes: usize,
    /// The most `read_file` returns in one call, in bytes (its schema's `length` maximum).
    pub read_max_bytes: usize,
    /// Files and folders one walk (find_files, search_files) looks at.
    pub search_max_entries: usize,
    /// Bytes of file contents one search_files reads.
    pub search_max_bytes: u64,
    /// Files a search reports.
    pub search_max_files: usize,
    /// Matching lines shown per file.
    pub search_lines_per_file: usize,
    /// Names find_files reports.
    pub find_max_results: usize,
    /// Entries list_folder shows.
    pub list_max_entries: usize,
    /// A line longer than this is searched in pieces of this size, so a file without line
    /// ends (or a 1 GB one) never takes more memory than this.
    pub line_max_bytes: usize,
    /// How deep walks go below a granted folder.
    pub walk_max_depth: usize,
    /// Bytes of files read in one turn, all calls together.
    pub turn_max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_default_bytes: 4 * 1024,
            read_max_bytes: 16 * 1024,
            search_max_entries: 5_000,
            search_max_bytes: 64 << 20,
            search_max_files: 20,
            search_lines_per_file: 3,
            find_max_results: 100,
            list_max_entries: 200,
            line_max_bytes: 4 * 1024,
            walk_max_depth: 32,
            turn_max_bytes: 256 << 20,
        }
    }
}

/// Bytes of files read in the current turn, shared by every call of the turn. The caller
/// (the agent loop, the CLI) calls [`TurnBudget::reset`] when a new user message starts.
#[derive(Debug)]
pub struct TurnBudget {
    limit: u64,
    used: AtomicU64,
}

impl TurnBudget {
    pub fn new(limit: u64) -> Self {
        TurnBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    pub fn for_limits(limits: &Limits) -> Self {
        TurnBudget::new(limits.turn_max_bytes)
    }

    pub fn reset(&self) {
        self.used.store(0, Ordering::Relaxed);
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used())
    }

    pub fn is_spent(&self) -> bool {
        self.remaining() == 0
    }

    /// Count `bytes` as read (even past the limit: they were read).
    pub(crate) fn spend(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_and_resets() {
        let b = TurnBudget::new(10);
        b.spend(4);
        assert_eq!((b.used(), b.remaining(), b.is_spent()), (4, 6, false));
        b.spend(7);
        assert_eq!((b.remaining(), b.is_spent()), (0, true));
        b.reset();
        assert_eq!(b.remaining(), 10);
    }
}
