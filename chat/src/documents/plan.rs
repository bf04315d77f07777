//! The pure arithmetic of a map-reduce summarization: how many tokens a chunk may have so that
//! instruction, chunk and summary fit the context; how summaries are grouped into the next
//! level; how many steps the whole job will take, for progress. No engine, no store: tested
//! inline.

/// Tokens of the seam between two summaries joined for the next level ("\n\n" and the
/// tokenizer merging across it, rounded up).
pub const SEAM_TOKENS: usize = 4;

/// Room kept free besides the instruction and the summary: the chat template's turn markers
/// around the generated text, so that a full chunk never meets the end of the context.
pub const SAFETY_TOKENS: usize = 16;

/// How many tokens a chunk (or a group of summaries) may have, or `None` when the context is
/// too small for the job to converge: a group must hold at least two summaries, or combining
/// would never shrink a level.
pub fn chunk_budget(
    context: usize,
    instruction_tokens: usize,
    summary_tokens: usize,
) -> Option<usize> {
    let budget = context.checked_sub(instruction_tokens + summary_tokens + SAFETY_TOKENS)?;
    (budget >= 2 * summary_tokens + SEAM_TOKENS).then_some(budget)
}

/// Greedy grouping of items that arrive one at a time: consecutive items fill a group while
/// they fit `budget` with a seam between them; every group holds at least one item.
#[derive(Debug, Clone)]
pub struct Grouping {
    budget: usize,
    /// Tokens of the group being filled, seams included; `None` before the first item.
    used: Option<usize>,
}

impl Grouping {
    pub fn new(budget: usize) -> Grouping {
        Grouping { budget, used: None }
    }

    /// Add an item of `tokens` tokens: `true` when it starts a new group (the first item
    /// always does).
    pub fn add(&mut self, tokens: usize) -> bool {
        match self.used {
            Some(used) if used + SEAM_TOKENS + tokens <= self.budget => {
                self.used = Some(used + SEAM_TOKENS + tokens);
                false
            }
            _ => {
                self.used = Some(tokens);
                true
            }
        }
    }
}

/// Steps (summaries to make) of the levels above one with `items` summaries, assuming every
/// summary is full length: an upper bound in practice, since most summaries end early.
pub fn reduce_steps(mut items: usize, budget: usize, summary_tokens: usize) -> usize {
    let per_group = ((budget + SEAM_TOKENS) / (summary_tokens + SEAM_TOKENS)).max(2);
    let mut steps = 0;
    while items > 1 {
        items = items.div_ceil(per_group);
        steps += items;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consecutive groups of items (given by their token counts) that fit `budget` with a seam
    /// between items; every group holds at least one item. Ranges of indices.
    pub fn group(tokens: &[usize], budget: usize) -> Vec<std::ops::Range<usize>> {
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        let mut grouping = Grouping::new(budget);
        for (i, &t) in tokens.iter().enumerate() {
            if grouping.add(t) {
                groups.push(i..i + 1);
            } else if let Some(last) = groups.last_mut() {
                last.end = i + 1;
            }
        }
        groups
    }

    #[test]
    fn the_budget_leaves_room_for_instruction_and_summary() {
        assert_eq!(
            chunk_budget(2048, 60, 96),
            Some(2048 - 60 - 96 - SAFETY_TOKENS)
        );
        // 2 summaries of 96 no longer fit beside a 96-token summary in 320 tokens
        assert_eq!(chunk_budget(320, 60, 96), None);
        assert_eq!(chunk_budget(100, 60, 96), None);
    }

    #[test]
    fn groups_fill_the_budget_in_order() {
        assert_eq!(group(&[10, 10, 10, 10, 10], 24), [0..2, 2..4, 4..5]);
        assert_eq!(group(&[30, 5], 20), [0..1, 1..2]);
        assert!(group(&[], 10).is_empty());
    }

    #[test]
    fn reduce_steps_count_every_level() {
        // 20 chunks, 4 summaries a group: 5, then 2, then 1
        assert_eq!(reduce_steps(20, 4 * 100 + 3 * SEAM_TOKENS, 100), 8);
        assert_eq!(reduce_steps(1, 1000, 100), 0);
        assert_eq!(reduce_steps(2, 1000, 100), 1);
    }
}
