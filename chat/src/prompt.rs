//! The prompt of a conversation as the engine sees it: the system prompt and the summaries in
//! force go into the system text (Gemma folds it into the first user turn), then the messages
//! after the summaries, verbatim.

use engine::ChatMessage;
use memory::{PromptParts, Role};

const SUMMARY_HEADER: &str = "Summary of the conversation so far:";

/// The system text: the user's system prompt, then the summaries.
pub fn system_text(system_prompt: Option<&str>, parts: &PromptParts) -> Option<String> {
    let mut blocks: Vec<String> = Vec::new();
    if let Some(s) = system_prompt.map(str::trim).filter(|s| !s.is_empty()) {
        blocks.push(s.to_string());
    }
    if !parts.summaries.is_empty() {
        let mut b = String::from(SUMMARY_HEADER);
        for s in &parts.summaries {
            b.push('\n');
            b.push_str(s.text.trim());
        }
        blocks.push(b);
    }
    (!blocks.is_empty()).then(|| blocks.join("\n\n"))
}

/// The engine's chat messages for `parts`, without an open model turn.
pub fn chat_messages(system_prompt: Option<&str>, parts: &PromptParts) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    if let Some(system) = system_text(system_prompt, parts) {
        out.push(ChatMessage::system(system));
        // Gemma's turns start with the user's: when a summary ends on a user message, the
        // system text needs a user turn of its own to live in
        if parts
            .messages
            .first()
            .is_some_and(|m| m.role == Role::Assistant)
        {
            out.push(ChatMessage::user("(The conversation continues.)"));
        }
    }
    for m in &parts.messages {
        out.push(match m.role {
            Role::User | Role::System => ChatMessage::user(m.text.clone()),
            Role::Assistant => ChatMessage::assistant(m.text.clone()),
        });
    }
    out
}
