//! L2 in action: assemble the prompt parts of a conversation (summaries in force, then the
//! messages after them) and, when [`crate::policy`] says so, have the [`Summarizer`] write
//! summaries until the prompt fits again. Each summary is committed as soon as it is made.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::policy::{self, Action, MessageTokens, PolicyConfig, SummaryTokens};
use crate::store::Store;
use crate::summarizer::{Summarizer, SummaryRequest};
use crate::types::{ConversationId, Message, MessageStatus, NewSummary, Role, Summary};

/// Guard against a summarizer that never shrinks anything.
const MAX_ACTIONS: usize = 16;

/// What goes into the next prompt, after the system prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptParts {
    pub summaries: Vec<Summary>,
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionOutcome {
    pub summaries_made: usize,
    /// Estimated prompt size afterwards.
    pub prompt_tokens: usize,
    /// Set when even after summarizing, the prompt leaves no room for a reply.
    pub overflow: Option<usize>,
}

/// Messages that belong in a prompt: user and assistant turns that were finished with text.
fn in_prompt(m: &Message) -> bool {
    m.role != Role::System
        && m.status != MessageStatus::Streaming
        && !(m.status == MessageStatus::Error && m.text.is_empty())
}

/// Token count of a message, estimated from its length when the glue did not record one.
fn tokens_of(m: &Message) -> usize {
    m.token_count
        .map(|t| t.max(0) as usize)
        .unwrap_or_else(|| m.text.len().div_ceil(3))
}

impl Store {
    pub fn prompt_parts(&self, conversation: &ConversationId) -> Result<PromptParts> {
        let summaries = self.summaries(conversation)?;
        let active = policy::active_summaries(&summary_tokens(&summaries));
        let first_live = policy::first_live_seq(&active);
        let summaries = summaries
            .into_iter()
            .filter(|s| active.iter().any(|a| a.id == s.id))
            .collect();
        let messages = self
            .messages(conversation)?
            .into_iter()
            .filter(|m| m.seq >= first_live && in_prompt(m))
            .collect();
        Ok(PromptParts {
            summaries,
            messages,
        })
    }

    /// Summarize until the prompt is under the high-water mark (or nothing more can be done).
    pub fn compact(
        &self,
        conversation: &ConversationId,
        config: &PolicyConfig,
        system_tokens: usize,
        summarizer: &mut dyn Summarizer,
    ) -> Result<CompactionOutcome> {
        let mut outcome = CompactionOutcome::default();
        for _ in 0..MAX_ACTIONS {
            let summaries = self.summaries(conversation)?;
            let messages: Vec<Message> = self
                .messages(conversation)?
                .into_iter()
                .filter(in_prompt)
                .collect();
            let s_tokens = summary_tokens(&summaries);
            let m_tokens: Vec<MessageTokens> = messages
                .iter()
                .map(|m| MessageTokens {
                    seq: m.seq,
                    role: m.role,
                    tokens: tokens_of(m),
                })
                .collect();
            let active = policy::active_summaries(&s_tokens);
            let live = policy::live_messages(&m_tokens, &active);
            outcome.prompt_tokens = policy::prompt_tokens(config, system_tokens, &active, &live);
            let (request, first_seq, last_seq) =
                match policy::next_action(config, system_tokens, &s_tokens, &m_tokens) {
                    Action::Keep => return Ok(outcome),
                    Action::Overflow { tokens, .. } => {
                        outcome.overflow = Some(tokens);
                        return Ok(outcome);
                    }
                    Action::Summarize {
                        first_seq,
                        last_seq,
                    } => {
                        // what came before these messages, so the summary reads in context
                        let earlier = summaries
                            .iter()
                            .filter(|s| active.iter().any(|a| a.id == s.id))
                            .map(|s| s.text.clone())
                            .collect::<Vec<_>>();
                        let request = SummaryRequest {
                            earlier_summaries: earlier,
                            messages: messages
                                .iter()
                                .filter(|m| m.seq >= first_seq && m.seq <= last_seq)
                                .map(|m| (m.role, m.text.clone()))
                                .collect(),
                            max_tokens: config.summary_max_tokens,
                        };
                        (request, first_seq, last_seq)
                    }
                    Action::MergeSummaries {
                        ids,
                        first_seq,
                        last_seq,
                    } => {
                        let request = SummaryRequest {
                            earlier_summaries: ids
                                .iter()
                                .filter_map(|id| summaries.iter().find(|s| s.id == *id))
                                .map(|s| s.text.clone())
                                .collect(),
                            messages: Vec::new(),
                            max_tokens: config.summary_max_tokens,
                        };
                        (request, first_seq, last_seq)
                    }
                };
            let written = summarizer
                .summarize(&request)
                .map_err(|e| Error::Summarizer(e.to_string()))?;
            self.add_summary(
                conversation,
                &NewSummary {
                    first_seq,
                    last_seq,
                    text: written.text,
                    token_count: written.token_count as i64,
                    model: written.model,
                },
            )?;
            outcome.summaries_made += 1;
        }
        Ok(outcome)
    }
}

fn summary_tokens(summaries: &[Summary]) -> Vec<SummaryTokens> {
    summaries
        .iter()
        .map(|s| SummaryTokens {
            id: s.id,
            first_seq: s.first_seq,
            last_seq: s.last_seq,
            tokens: s.token_count.max(0) as usize,
        })
        .collect()
}
