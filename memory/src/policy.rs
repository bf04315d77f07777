//! The L2 policy, as pure functions over token counts: which summaries are in force, how big
//! the prompt `system + summaries + recent messages` is, and what to do when it passes the
//! high-water mark — summarize the oldest messages not yet summarized, or merge summaries
//! when they themselves have grown. The system prompt and the latest messages (the user's
//! newest message among them) are never summarized away.

use serde::{Deserialize, Serialize};

use crate::types::{Role, SummaryId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyConfig {
    /// Tokens the live session holds.
    pub context_tokens: usize,
    /// Summarize before the prompt passes this share of the context.
    pub high_water: f32,
    /// After summarizing, aim for a prompt no bigger than this share of the context.
    pub low_water: f32,
    /// The newest messages are never summarized (the last exchange and the new message).
    pub keep_recent_messages: usize,
    /// Longest summary the summarizer is asked for.
    pub summary_max_tokens: usize,
    /// Merge summaries when together they take more than this share of the context.
    pub summaries_share: f32,
    /// Tokens the chat template adds around each message or summary.
    pub turn_overhead_tokens: usize,
    /// Room a reply needs at least: a prompt bigger than `context - this` cannot be answered.
    pub min_reply_tokens: usize,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            context_tokens: 4096,
            high_water: 0.75,
            low_water: 0.5,
            keep_recent_messages: 3,
            summary_max_tokens: 160,
            summaries_share: 0.25,
            turn_overhead_tokens: 6,
            min_reply_tokens: 32,
        }
    }
}

impl PolicyConfig {
    pub fn for_context(context_tokens: usize) -> Self {
        PolicyConfig {
            context_tokens,
            ..Self::default()
        }
    }

    fn share(&self, share: f32) -> usize {
        (self.context_tokens as f64 * share as f64) as usize
    }
}

/// A message as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageTokens {
    pub seq: i64,
    pub role: Role,
    pub tokens: usize,
}

/// A summary as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryTokens {
    pub id: SummaryId,
    pub first_seq: i64,
    pub last_seq: i64,
    pub tokens: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The prompt fits: nothing to do.
    Keep,
    /// Summarize the messages `first_seq..=last_seq` into one summary.
    Summarize { first_seq: i64, last_seq: i64 },
    /// Merge these summaries (oldest first) into one covering `first_seq..=last_seq`.
    MergeSummaries {
        ids: Vec<SummaryId>,
        first_seq: i64,
        last_seq: i64,
    },
    /// Nothing more can be summarized and the prompt leaves no room for a reply: the newest
    /// messages alone are `tokens` long.
    Overflow { tokens: usize, context: usize },
}

/// The summaries in force: those not contained in a later summary's range, oldest first.
pub fn active_summaries(summaries: &[SummaryTokens]) -> Vec<SummaryTokens> {
    let mut active: Vec<SummaryTokens> = summaries
        .iter()
        .filter(|s| {
            !summaries
                .iter()
                .any(|o| o.id > s.id && o.first_seq <= s.first_seq && o.last_seq >= s.last_seq)
        })
        .copied()
        .collect();
    active.sort_by_key(|s| (s.first_seq, s.id));
    active
}

/// The first message not covered by a summary in force.
pub fn first_live_seq(active: &[SummaryTokens]) -> i64 {
    active.iter().map(|s| s.last_seq + 1).max().unwrap_or(0)
}

/// Messages that go into the prompt verbatim.
pub fn live_messages(messages: &[MessageTokens], active: &[SummaryTokens]) -> Vec<MessageTokens> {
    let first = first_live_seq(active);
    messages
        .iter()
        .filter(|m| m.seq >= first)
        .copied()
        .collect()
}

/// Prompt size: system + summaries in force + live messages, each with the template's cost.
pub fn prompt_tokens(
    config: &PolicyConfig,
    system_tokens: usize,
    active: &[SummaryTokens],
    live: &[MessageTokens],
) -> usize {
    let o = config.turn_overhead_tokens;
    system_tokens
        + active.iter().map(|s| s.tokens + o).sum::<usize>()
        + live.iter().map(|m| m.tokens + o).sum::<usize>()
}

/// What to do before the next reply. Apply the action and ask again until `Keep`.
pub fn next_action(
    config: &PolicyConfig,
    system_tokens: usize,
    summaries: &[SummaryTokens],
    messages: &[MessageTokens],
) -> Action {
    let active = active_summaries(summaries);
    let live = live_messages(messages, &active);
    let total = prompt_tokens(config, system_tokens, &active, &live);
    if total <= config.share(config.high_water) {
        return Action::Keep;
    }
    let o = config.turn_overhead_tokens;
    let summary_cost = config.summary_max_tokens + o;
    let summaries_total: usize = active.iter().map(|s| s.tokens + o).sum();
    let can_merge = active.len() >= 2 && summaries_total > summary_cost;
    if can_merge && summaries_total > config.share(config.summaries_share) {
        return merge(&active);
    }
    // the oldest live messages, never the newest few
    let candidates = live.len().saturating_sub(config.keep_recent_messages);
    let target = config.share(config.low_water);
    let mut k = 0;
    let mut removed = 0;
    while k < candidates {
        removed += live[k].tokens + o;
        k += 1;
        if total - removed + summary_cost <= target {
            break;
        }
    }
    // end on a reply, so a summary covers whole exchanges
    if k < candidates && live[k - 1].role == Role::User && live[k].role == Role::Assistant {
        removed += live[k].tokens + o;
        k += 1;
    }
    if k > 0 && removed > summary_cost {
        return Action::Summarize {
            first_seq: live[0].seq,
            last_seq: live[k - 1].seq,
        };
    }
    if can_merge {
        return merge(&active);
    }
    let limit = config
        .context_tokens
        .saturating_sub(config.min_reply_tokens);
    if total > limit {
        return Action::Overflow {
            tokens: total,
            context: config.context_tokens,
        };
    }
    Action::Keep
}

fn merge(active: &[SummaryTokens]) -> Action {
    Action::MergeSummaries {
        ids: active.iter().map(|s| s.id).collect(),
        first_seq: active.iter().map(|s| s.first_seq).min().unwrap_or(0),
        last_seq: active.iter().map(|s| s.last_seq).max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PolicyConfig {
        PolicyConfig {
            context_tokens: 1000,
            high_water: 0.75,
            low_water: 0.5,
            keep_recent_messages: 3,
            summary_max_tokens: 50,
            summaries_share: 0.25,
            turn_overhead_tokens: 0,
            min_reply_tokens: 32,
        }
    }

    fn conversation(sizes: &[usize]) -> Vec<MessageTokens> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &tokens)| MessageTokens {
                seq: i as i64,
                role: if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                tokens,
            })
            .collect()
    }

    fn summary(id: i64, first_seq: i64, last_seq: i64, tokens: usize) -> SummaryTokens {
        SummaryTokens {
            id: SummaryId(id),
            first_seq,
            last_seq,
            tokens,
        }
    }

    #[test]
    fn under_the_high_water_mark_nothing_happens() {
        let m = conversation(&[100, 100, 100, 100, 100, 100, 100]); // 700 + 50 system = 750
        assert_eq!(next_action(&config(), 50, &[], &m), Action::Keep);
    }

    #[test]
    fn past_the_mark_the_oldest_whole_exchanges_are_summarized_down_to_the_low_mark() {
        let m = conversation(&[100, 100, 100, 100, 100, 100, 100, 100]); // 800 + 50
        // reaching 500 needs 850 - removed + 50 <= 500: removed >= 400, i.e. messages 0..=3
        assert_eq!(
            next_action(&config(), 50, &[], &m),
            Action::Summarize {
                first_seq: 0,
                last_seq: 3
            }
        );
    }

    #[test]
    fn a_summary_ends_on_a_reply_and_never_takes_the_newest_messages() {
        // one huge early user message: removing it alone reaches the target, but its reply
        // goes with it
        let m = conversation(&[600, 20, 20, 20, 100]);
        assert_eq!(
            next_action(&config(), 10, &[], &m),
            Action::Summarize {
                first_seq: 0,
                last_seq: 1
            }
        );
        // only the three newest messages: nothing may be summarized; they still fit
        let m = conversation(&[300, 300, 300]);
        assert_eq!(next_action(&config(), 10, &[], &m), Action::Keep);
    }

    #[test]
    fn summarized_messages_leave_the_prompt_and_the_summary_joins_it() {
        let m = conversation(&[100; 8]);
        let s = [summary(1, 0, 3, 50)];
        let active = active_summaries(&s);
        let live = live_messages(&m, &active);
        assert_eq!(live.first().map(|m| m.seq), Some(4));
        assert_eq!(prompt_tokens(&config(), 50, &active, &live), 50 + 50 + 400);
        assert_eq!(next_action(&config(), 50, &s, &m), Action::Keep);
    }

    #[test]
    fn summaries_that_grew_too_big_are_merged() {
        let m = conversation(&[100; 14]);
        let s = [
            summary(1, 0, 1, 90),
            summary(2, 2, 3, 90),
            summary(3, 4, 5, 90),
        ];
        // 270 of summaries > 25% of 1000
        assert_eq!(
            next_action(&config(), 10, &s, &m),
            Action::MergeSummaries {
                ids: vec![SummaryId(1), SummaryId(2), SummaryId(3)],
                first_seq: 0,
                last_seq: 5
            }
        );
        // once merged, the older summaries are out of force
        let merged = [s[0], s[1], s[2], summary(4, 0, 5, 50)];
        assert_eq!(active_summaries(&merged), vec![summary(4, 0, 5, 50)]);
    }

    #[test]
    fn a_message_too_long_for_the_context_overflows_instead_of_being_dropped() {
        let m = conversation(&[20, 20, 990]);
        assert_eq!(
            next_action(&config(), 10, &[], &m),
            Action::Overflow {
                tokens: 1040,
                context: 1000
            }
        );
    }

    #[test]
    fn repeated_actions_converge_for_a_long_conversation() {
        // simulate: every summary costs its maximum
        let cfg = config();
        let mut m = Vec::new();
        let mut s: Vec<SummaryTokens> = Vec::new();
        for turn in 0..200 {
            m.push(MessageTokens {
                seq: m.len() as i64,
                role: if turn % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                tokens: 40 + (turn * 7) % 60,
            });
            for _ in 0..10 {
                match next_action(&cfg, 30, &s, &m) {
                    Action::Keep => break,
                    Action::Summarize {
                        first_seq,
                        last_seq,
                    }
                    | Action::MergeSummaries {
                        first_seq,
                        last_seq,
                        ..
                    } => s.push(summary(s.len() as i64 + 1, first_seq, last_seq, 50)),
                    Action::Overflow { .. } => panic!("a long conversation overflowed"),
                }
            }
            let active = active_summaries(&s);
            let live = live_messages(&m, &active);
            let size = prompt_tokens(&cfg, 30, &active, &live);
            assert!(
                size <= 750,
                "turn {turn}: prompt {size} above the high-water mark"
            );
            assert_eq!(live.last().map(|x| x.seq), Some(m.len() as i64 - 1));
        }
        assert!(s.len() > 5);
    }
}
