//! Gemma's chat template, as in the `chat_template` Google ships with Gemma 3:
//!
//! ```text
//! <bos><start_of_turn>user
//! {system}\n\n{first user message}<end_of_turn>
//! <start_of_turn>model
//! {reply}<end_of_turn>
//! <start_of_turn>user
//! …<end_of_turn>
//! <start_of_turn>model
//! ```
//! Gemma has no system role: a system text is folded into the first user turn, followed by a
//! blank line. Message text is trimmed, as the template's `| trim` does. The `<bos>` is added as a
//! token by the caller, not rendered here.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Render a conversation. With `add_generation_prompt`, ends with an open model turn.
pub fn render_chat(messages: &[ChatMessage], add_generation_prompt: bool) -> String {
    let mut out = String::new();
    let mut system: Option<String> = None;
    let mut first_user_done = false;
    for message in messages {
        match message.role {
            Role::System => {
                let text = message.content.trim();
                system = Some(match system.take() {
                    Some(prev) => format!("{prev}\n\n{text}"),
                    None => text.to_string(),
                });
            }
            Role::User | Role::Assistant => {
                let role = if message.role == Role::User {
                    "user"
                } else {
                    "model"
                };
                out.push_str("<start_of_turn>");
                out.push_str(role);
                out.push('\n');
                if !first_user_done && message.role == Role::User {
                    if let Some(system) = system.take() {
                        out.push_str(&system);
                        out.push_str("\n\n");
                    }
                    first_user_done = true;
                }
                out.push_str(message.content.trim());
                out.push_str("<end_of_turn>\n");
            }
        }
    }
    if add_generation_prompt {
        out.push_str("<start_of_turn>model\n");
    }
    out
}

/// The conversation so far followed by an open user turn holding `draft`: the start of what
/// [`render_chat`] gives once `draft` is sent as the user's message. Rendering the draft as
/// that message (then cutting the turn's end) keeps a system text folded in the same way.
pub fn render_open_user_turn(history: &[ChatMessage], draft: &str) -> String {
    let mut messages = history.to_vec();
    messages.push(ChatMessage::user(draft));
    let mut out = render_chat(&messages, false);
    if out.ends_with(END_OF_USER_TURN) {
        out.truncate(out.len() - END_OF_USER_TURN.len());
    }
    out
}

const END_OF_USER_TURN: &str = "<end_of_turn>\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_user_turn() {
        let s = render_chat(&[ChatMessage::user("Hi there")], true);
        assert_eq!(
            s,
            "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn system_is_folded_into_first_user_turn() {
        let s = render_chat(
            &[
                ChatMessage::system("You are terse."),
                ChatMessage::user("Hello"),
                ChatMessage::assistant("Hi."),
                ChatMessage::user("Bye"),
            ],
            true,
        );
        assert_eq!(
            s,
            "<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n\
             <start_of_turn>model\nHi.<end_of_turn>\n\
             <start_of_turn>user\nBye<end_of_turn>\n\
             <start_of_turn>model\n"
        );
    }

    #[test]
    fn an_open_user_turn_starts_the_sent_prompt() {
        let history = [
            ChatMessage::system("Be brief."),
            ChatMessage::user("Hi"),
            ChatMessage::assistant("Hello."),
        ];
        let open = render_open_user_turn(&history, "How are ");
        assert!(open.ends_with("<start_of_turn>user\nHow are"), "{open:?}");
        let mut sent = history.to_vec();
        sent.push(ChatMessage::user("How are you?"));
        assert!(render_chat(&sent, true).starts_with(&open));
        // the system text folds into a first user turn that is still a draft
        let first = render_open_user_turn(&[ChatMessage::system("Be brief.")], "Hi");
        assert_eq!(first, "<start_of_turn>user\nBe brief.\n\nHi");
    }

    #[test]
    fn content_is_trimmed_and_no_prompt_without_flag() {
        let s = render_chat(
            &[
                ChatMessage::user("  spaced \n"),
                ChatMessage::assistant("\nreply  "),
            ],
            false,
        );
        assert_eq!(
            s,
            "<start_of_turn>user\nspaced<end_of_turn>\n<start_of_turn>model\nreply<end_of_turn>\n"
        );
    }
}
