//! How long drafts are and when drafting rests, for every source of drafts (`lookup`, `mtp`):
//! the length adapts to how many drafted tokens the model kept lately, and drafting rests when
//! drafts keep being refused or when drafting and checking cost more per token than plain
//! decode steps (timed as they run: a check of a few rows costs from about one step, where
//! decode waits on memory, to one step per row, where it waits on arithmetic), so a generation
//! where drafts do not pay costs no more than without speculation, beyond the drafting itself.

/// The longest draft (a check of `MAX_DRAFT + 1` tokens must fit a sliding-window cache's
/// chunk, see `kv_cache`). Each row of a check holds its logits (1 MiB with a 262k
/// vocabulary, twice over while the product is laid out: `memory_guard` counts them); past
/// four drafts a check cost about a row's work per row here and summaries rarely kept more.
pub const MAX_DRAFT: usize = 4;
/// Checks remembered for the acceptance rate.
const RECENT: usize = 8;
/// Below this many tokens kept per check (on average over [`RECENT`] checks), drafting rests
/// for [`REST_TOKENS`] tokens: each refused check costs more than a plain step.
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
pub struct DraftControl {
    /// The length of the next draft.
    length: usize,
    /// Tokens kept in the last checks.
    recent: Vec<usize>,
    /// Tokens to generate before drafting again.
    resting: usize,
    /// The next rest after a verdict that checks cost too much.
    next_rest: usize,
    /// Running averages: seconds of a plain decode step, and of a draft and its check per
    /// token it gave.
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

impl Default for DraftControl {
    fn default() -> Self {
        DraftControl {
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

fn average(old: Option<f64>, new: f64) -> Option<f64> {
    Some(match old {
        Some(old) => old + TIME_WEIGHT * (new - old),
        None => new,
    })
}

impl DraftControl {
    /// Control that rests only for refused drafts, never for what its checks cost.
    pub fn untimed() -> Self {
        DraftControl {
            timed: false,
            ..DraftControl::default()
        }
    }

    /// How many tokens to draft for this step, at most `room`: 0 while drafting rests (each
    /// call is one token of the rest).
    pub fn next_length(&mut self, room: usize) -> usize {
        if self.resting > 0 {
            self.resting -= 1;
            return 0;
        }
        self.length.min(room)
    }

    /// A plain decode step (one token) took `seconds`.
    pub fn record_step(&mut self, seconds: f64) {
        self.step_seconds = average(self.step_seconds, seconds);
    }

    /// The model kept `kept` of the `drafted` tokens of the last check; drafting and checking
    /// took `seconds` and gave `kept + 1` tokens.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Drafts of `n` tokens until the control rests; how many tokens the rest lasts.
    fn rest(c: &mut DraftControl) -> usize {
        let mut n = 0;
        while c.next_length(8) == 0 {
            n += 1;
        }
        n
    }

    #[test]
    fn checks_that_cost_more_per_token_than_steps_rest_longer_each_time() {
        let mut c = DraftControl::default();
        // checks give 2 tokens for 3 step-times: 1.5 steps a token
        for _ in 0..CHECKS_BEFORE_VERDICT {
            assert!(c.next_length(8) > 0);
            c.record(1, 1, 3.0);
        }
        // no step timed yet: one plain step first
        assert_eq!(c.next_length(8), 0);
        c.record_step(1.0);
        assert!(c.next_length(8) > 0);
        c.record(1, 1, 3.0);
        assert_eq!(rest(&mut c), REST_TOKENS);
        for _ in 0..CHECKS_BEFORE_VERDICT {
            c.record(1, 1, 3.0);
        }
        assert_eq!(rest(&mut c), 2 * REST_TOKENS);
        // checks that pay (4 tokens for 2 step-times) go on, and the rest starts over
        for _ in 0..CHECKS_BEFORE_VERDICT + 8 {
            c.record(3, 3, 2.0);
            assert!(c.next_length(8) > 0);
        }
        assert_eq!(c.next_rest, REST_TOKENS);
    }

    #[test]
    fn the_draft_grows_shrinks_and_rests() {
        let mut c = DraftControl::default();
        assert_eq!(c.length, 3);
        c.record(3, 3, 0.0);
        assert_eq!(c.length, 4);
        c.record(4, 4, 0.0);
        assert_eq!(c.length, MAX_DRAFT);
        c.record(4, 1, 0.0);
        assert_eq!(c.length, 2);
        c.record(2, 0, 0.0);
        assert_eq!(c.length, 1);
        // refused again and again: it rests, then tries again
        for _ in 0..RECENT {
            c.record(1, 0, 0.0);
        }
        assert_eq!(rest(&mut c), REST_TOKENS);
        assert_eq!(c.next_length(8), 1);
        assert_eq!(c.next_length(0), 0, "no room, no draft");
    }
}
