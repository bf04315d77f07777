//! Drafts by prompt lookup: find the longest recent n-gram of the session's tokens that ends
//! like the tokens so far, and propose what followed it. The draft length adapts to how many
//! drafted tokens the model kept lately, and the lookup rests when its drafts keep being
//! refused or when its checks cost more per token than plain decode steps (timed as they run:
//! a check of a few rows costs from about one step, where decode waits on memory, to one step
//! per row, where it waits on arithmetic), so a generation that repeats nothing, or a device
//! where checking does not pay, costs no more than without speculation beyond the search.

/// The longest and shortest n-gram matched.
const MAX_NGRAM: usize = 4;
const MIN_NGRAM: usize = 2;
/// The longest draft (a check of `MAX_DRAFT + 1` tokens must fit a sliding-window cache's
/// chunk, see `kv_cache`). Each row of a check holds its logits (1 MiB with a 262k
/// vocabulary, twice over while the product is laid out: `memory_guard` counts them); past
/// four drafts a check cost about a row's work per row here and summaries rarely kept more.
pub const MAX_DRAFT: usize = 4;
/// How far back a match is looked for.
const SEARCH_WINDOW: usize = 16_384;
/// Checks remembered for the acceptance rate.
const RECENT: usize = 8;
/// Below this many tokens kept per check (on average over [`RECENT`] checks), the lookup
/// rests for [`REST_TOKENS`] tokens: each refused check costs more than a plain step.
const MIN_KEPT_PER_CHECK: f32 = 0.6;
const REST_TOKENS: usize = 32;
/// The longest rest after checks that cost more per token than plain steps (the rest doubles
/// from [`REST_TOKENS`] at each such verdict in a row).
const MAX_REST_TOKENS: usize = 512;
/// Weight of the newest time in the running averages.
const TIME_WEIGHT: f64 = 0.25;
/// Checks timed before their cost is compared with a plain step's.
const CHECKS_BEFORE_VERDICT: usize = 3;

#[derive(Debug, Clone)]
pub struct PromptLookup {
    /// The length of the next draft.
    length: usize,
    /// Tokens kept in the last checks.
    recent: Vec<usize>,
    /// Tokens to generate before drafting again.
    resting: usize,
    /// The next rest after a verdict that checks cost too much.
    next_rest: usize,
    /// Running averages: seconds of a plain decode step, and of a check per token it gave.
    step_seconds: Option<f64>,
    check_seconds_per_token: Option<f64>,
    /// Checks timed since the last verdict.
    timed_checks: usize,
    /// Whether checks that cost more per token than steps make it rest.
    timed: bool,
    /// Totals, for the statistics.
    pub drafted: usize,
    pub kept: usize,
    pub checks: usize,
}

impl Default for PromptLookup {
    fn default() -> Self {
        PromptLookup {
            length: 3,
            recent: Vec::new(),
            resting: 0,
            next_rest: REST_TOKENS,
            step_seconds: None,
            check_seconds_per_token: None,
            timed_checks: 0,
            timed: true,
            drafted: 0,
            kept: 0,
            checks: 0,
        }
    }
}

impl PromptLookup {
    /// A lookup that rests only for refused drafts, never for what its checks cost.
    pub fn untimed() -> Self {
        PromptLookup {
            timed: false,
            ..PromptLookup::default()
        }
    }
}

fn average(old: Option<f64>, new: f64) -> Option<f64> {
    Some(match old {
        Some(old) => old + TIME_WEIGHT * (new - old),
        None => new,
    })
}

impl PromptLookup {
    /// A draft to follow `tokens` (the prompt and what was generated, the last token
    /// included), at most `room` long; empty when nothing matches or the lookup rests.
    pub fn draft(&mut self, tokens: &[u32], room: usize) -> Vec<u32> {
        if self.resting > 0 {
            self.resting -= 1;
            return Vec::new();
        }
        let length = self.length.min(room);
        if length == 0 {
            return Vec::new();
        }
        find(tokens, length)
    }

    /// A plain decode step (one token) took `seconds`.
    pub fn record_step(&mut self, seconds: f64) {
        self.step_seconds = average(self.step_seconds, seconds);
    }

    /// The model kept `kept` of the `drafted` tokens of the last check, which took `seconds`
    /// and gave `kept + 1` tokens.
    pub fn record(&mut self, drafted: usize, kept: usize, seconds: f64) {
        self.drafted += drafted;
        self.kept += kept;
        self.checks += 1;
        self.check_seconds_per_token =
            average(self.check_seconds_per_token, seconds / (kept + 1) as f64);
        self.timed_checks += 1;
        if self.timed && self.timed_checks >= CHECKS_BEFORE_VERDICT {
            match (self.step_seconds, self.check_seconds_per_token) {
                // no plain step timed yet: take one to compare with
                (None, _) => self.resting = self.resting.max(1),
                (Some(step), Some(check)) if check > step => {
                    // checks cost more per token than steps: rest, longer each time in a row
                    self.resting = self.resting.max(self.next_rest);
                    self.next_rest = (self.next_rest * 2).min(MAX_REST_TOKENS);
                    self.timed_checks = 0;
                    self.check_seconds_per_token = None;
                }
                _ => self.next_rest = REST_TOKENS,
            }
        }
        self.length = if kept == drafted {
            (self.length + 1).min(MAX_DRAFT)
        } else if kept == 0 {
            (self.length / 2).max(1)
        } else {
            (kept + 1).clamp(1, MAX_DRAFT)
        };
        self.recent.push(kept);
        if self.recent.len() > RECENT {
            self.recent.remove(0);
        }
        if self.recent.len() == RECENT {
            let mean = self.recent.iter().sum::<usize>() as f32 / RECENT as f32;
            if mean < MIN_KEPT_PER_CHECK {
                self.resting = REST_TOKENS;
                self.recent.clear();
            }
        }
    }
}

/// The continuation (up to `length` tokens) of the most recent earlier occurrence of the
/// longest suffix of `tokens` (from [`MAX_NGRAM`] down to [`MIN_NGRAM`] tokens).
pub fn find(tokens: &[u32], length: usize) -> Vec<u32> {
    let n_tokens = tokens.len();
    let start = n_tokens.saturating_sub(SEARCH_WINDOW);
    for n in (MIN_NGRAM..=MAX_NGRAM).rev() {
        if n_tokens <= n {
            continue;
        }
        let suffix = &tokens[n_tokens - n..];
        // occurrences ending before the suffix itself, most recent first
        let mut i = n_tokens - n;
        while i > start {
            i -= 1;
            if tokens[i..i + n] == *suffix {
                let from = i + n;
                let to = (from + length).min(n_tokens);
                if to > from {
                    return tokens[from..to].to_vec();
                }
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_most_recent_match_is_continued() {
        // "1 2 3 9 ... 1 2 3" → 9 follows; the later "2 3 7" is a shorter match
        let tokens = [1, 2, 3, 9, 8, 2, 3, 7, 5, 1, 2, 3];
        assert_eq!(find(&tokens, 3), vec![9, 8, 2]);
        // only a bigram matches: its most recent occurrence
        let tokens = [5, 6, 1, 5, 6, 2, 0, 5, 6];
        assert_eq!(find(&tokens, 2), vec![2, 0]);
        assert!(find(&[1, 2, 3, 4], 4).is_empty());
        assert!(find(&[], 4).is_empty());
    }

    #[test]
    fn checks_that_cost_more_per_token_than_steps_rest_longer_each_time() {
        let tokens = [1, 2, 1, 2, 1, 2];
        let mut l = PromptLookup::default();
        // checks give 2 tokens for 3 step-times: 1.5 steps a token
        for _ in 0..CHECKS_BEFORE_VERDICT {
            assert!(!l.draft(&tokens, 8).is_empty());
            l.record(1, 1, 3.0);
        }
        // no step timed yet: one plain step first
        assert!(l.draft(&tokens, 8).is_empty());
        l.record_step(1.0);
        assert!(!l.draft(&tokens, 8).is_empty());
        l.record(1, 1, 3.0);
        let rest = |l: &mut PromptLookup| {
            let mut n = 0;
            while l.draft(&tokens, 8).is_empty() {
                n += 1;
            }
            n
        };
        assert_eq!(rest(&mut l), REST_TOKENS);
        for _ in 0..CHECKS_BEFORE_VERDICT {
            l.record(1, 1, 3.0);
        }
        assert_eq!(rest(&mut l), 2 * REST_TOKENS);
        // checks that pay (4 tokens for 2 step-times) go on, and the rest starts over
        for _ in 0..CHECKS_BEFORE_VERDICT + 8 {
            l.record(3, 3, 2.0);
            assert!(!l.draft(&tokens, 8).is_empty());
        }
        assert_eq!(l.next_rest, REST_TOKENS);
    }

    #[test]
    fn the_draft_grows_shrinks_and_rests() {
        let mut l = PromptLookup::default();
        assert_eq!(l.length, 3);
        l.record(3, 3, 0.0);
        assert_eq!(l.length, 4);
        l.record(4, 4, 0.0);
        assert_eq!(l.length, MAX_DRAFT);
        l.record(4, 1, 0.0);
        assert_eq!(l.length, 2);
        l.record(2, 0, 0.0);
        assert_eq!(l.length, 1);
        // refused again and again: it rests, then tries again
        let tokens = [1, 2, 1, 2, 1, 2];
        for _ in 0..RECENT {
            l.record(1, 0, 0.0);
        }
        assert!(l.draft(&tokens, 8).is_empty());
        for _ in 1..REST_TOKENS {
            assert!(l.draft(&tokens, 8).is_empty());
        }
        assert!(!l.draft(&tokens, 8).is_empty());
    }
}
