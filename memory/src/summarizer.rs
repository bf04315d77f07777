//! The `Summarizer` trait: memory decides what to summarize, the glue (which knows the
//! engine) writes the summary. Keeping the model behind a trait keeps this crate free of
//! candle and lets tests use a deterministic summarizer.

use crate::types::Role;

/// What to summarize: earlier summaries being merged (oldest first), then messages.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    pub earlier_summaries: Vec<String>,
    pub messages: Vec<(Role, String)>,
    /// The summary must not be longer than this.
    pub max_tokens: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SummaryText {
    pub text: String,
    pub token_count: usize,
    /// The model that wrote it.
    pub model: String,
}

pub trait Summarizer {
    fn summarize(
        &mut self,
        request: &SummaryRequest,
    ) -> Result<SummaryText, Box<dyn std::error::Error + Send + Sync>>;
}
