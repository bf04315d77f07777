//! memory's [`Summarizer`] implemented with the engine: a greedy, repetition-penalized
//! generation over a summarization prompt. Greedy so that the same conversation gives the same
//! summary; the penalty because a small model otherwise loops.

use engine::{ChatMessage, EngineHandle, GenerateParams, Prompt, SamplingParams, Speculation};
use memory::{Role, Summarizer, SummaryRequest, SummaryText};

const INSTRUCTION: &str = "Summarize the conversation below in a few short sentences. Keep names, numbers, decisions and open questions. Write only the summary.";

/// Greedy, so the same input gives the same summary (what lets a resumed document job equal
/// an uninterrupted one), with a repetition penalty, because the small model otherwise loops.
pub(crate) fn summary_params(max_tokens: usize, speculation: Speculation) -> GenerateParams {
    GenerateParams {
        max_tokens,
        sampling: SamplingParams {
            temperature: 0.0,
            repetition_penalty: 1.15,
            ..SamplingParams::default()
        },
        stop_strings: Vec::new(),
        ignore_eos: false,
        speculation,
    }
}

pub struct EngineSummarizer<'a> {
    pub engine: &'a EngineHandle,
    /// Tokens the summarization prompt may use (the context less the summary's room).
    pub context: usize,
    /// The session summaries are made on, opened at the first one, so the conversation's
    /// own session and its draft stay as they are.
    session: Option<engine::ScratchSession>,
}

impl<'a> EngineSummarizer<'a> {
    pub fn new(engine: &'a EngineHandle, context: usize) -> Self {
        EngineSummarizer {
            engine,
            context,
            session: None,
        }
    }
}

impl EngineSummarizer<'_> {
    fn model_name(&self) -> String {
        let info = self.engine.info();
        info.name.clone().unwrap_or_else(|| {
            info.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }

    fn transcript(request: &SummaryRequest, max_chars: usize) -> String {
        let mut text = String::new();
        for s in &request.earlier_summaries {
            text.push_str("Earlier summary: ");
            text.push_str(s.trim());
            text.push('\n');
        }
        for (role, m) in &request.messages {
            let who = match role {
                Role::Assistant => "Assistant",
                Role::User | Role::System => "User",
            };
            text.push_str(who);
            text.push_str(": ");
            text.push_str(m.trim());
            text.push('\n');
        }
        if text.len() > max_chars {
            // keep the end: it is what the summary must carry forward
            let mut cut = text.len() - max_chars;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text = format!("…{}", &text[cut..]);
        }
        text
    }
}

impl Summarizer for EngineSummarizer<'_> {
    fn summarize(
        &mut self,
        request: &SummaryRequest,
    ) -> Result<SummaryText, Box<dyn std::error::Error + Send + Sync>> {
        let tokenizer = self.engine.tokenizer();
        let budget = self.context.saturating_sub(request.max_tokens + 64);
        let mut max_chars = usize::MAX;
        let ids = loop {
            let messages = vec![
                ChatMessage::system(INSTRUCTION),
                ChatMessage::user(Self::transcript(request, max_chars)),
            ];
            let ids = Prompt::Chat(messages).to_ids(tokenizer)?;
            if ids.len() <= budget || max_chars < 64 {
                break ids;
            }
            // about 3 characters a token; shrink until it fits
            max_chars = (budget * 3).min(max_chars.saturating_sub(max_chars / 4).max(64));
        };
        let params = summary_params(request.max_tokens, Speculation::default());
        let session = match &self.session {
            Some(s) => s.id(),
            None => self.session.insert(self.engine.open_session()?).id(),
        };
        let generation = self
            .engine
            .generate_on(session, Prompt::Ids(ids), params)?
            .wait(|_| {})?;
        let mut text = generation.text.trim().to_string();
        let mut token_count = generation.ids.len();
        if text.is_empty() {
            // never lose the content to an empty summary: fall back to the messages' openings
            text = request
                .messages
                .iter()
                .map(|(_, m)| m.chars().take(80).collect::<String>())
                .chain(request.earlier_summaries.iter().cloned())
                .collect::<Vec<_>>()
                .join(" / ");
            let ids = tokenizer.encode(&text, false)?;
            if ids.len() > request.max_tokens {
                text = tokenizer.decode(&ids[..request.max_tokens])?;
            }
            token_count = ids.len().min(request.max_tokens);
        }
        Ok(SummaryText {
            text,
            token_count,
            model: self.model_name(),
        })
    }
}
