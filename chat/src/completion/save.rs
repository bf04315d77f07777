//! Keeping an API exchange as a conversation, when the client asks for it: the messages and
//! the reply, searchable and exportable like any other conversation. Tool calls and results
//! are kept as text, the way the transcript shows them.

use memory::{ConversationId, NewMessage, Role, Store};

use super::request::RequestMessage;
use super::run::Completion;
use crate::error::Result;
use crate::manager::title_from;
use crate::picture::Picture;

fn call_text(calls: &[agent::ToolCall]) -> String {
    calls
        .iter()
        .map(|c| format!("[call {} {}]", c.name, c.arguments))
        .collect::<Vec<_>>()
        .join("\n")
}

fn joined(text: &str, extra: &str) -> String {
    match (text.trim().is_empty(), extra.is_empty()) {
        (_, true) => text.to_string(),
        (true, false) => extra.to_string(),
        (false, false) => format!("{text}\n{extra}"),
    }
}

/// Save `messages` and `reply` as a new conversation titled by the first user message, with
/// `model` (the model's label) and `source` ("local API") in its settings.
pub fn save_exchange(
    store: &Store,
    model: &str,
    messages: &[RequestMessage],
    reply: &Completion,
) -> Result<ConversationId> {
    let first_user = messages
        .iter()
        .find_map(|m| match m {
            RequestMessage::User(t, _) => Some(t.as_str()),
            _ => None,
        })
        .unwrap_or("");
    let settings = serde_json::json!({ "source": "local API" });
    let conversation =
        store.create_conversation(&title_from(first_user), Some(model), &settings)?;
    let id = conversation.id;
    let append_with = |role: Role, text: String, pictures: &[Picture]| -> Result<()> {
        let images = pictures
            .iter()
            .map(|p| store.save_image(p.bytes(), p.media_type()))
            .collect::<memory::Result<Vec<_>>>()?;
        store.append_message(
            &id,
            &NewMessage::complete(role, text, None).with_images(images),
        )?;
        Ok(())
    };
    let append = |role: Role, text: String| append_with(role, text, &[]);
    for m in messages {
        match m {
            RequestMessage::System(t) => append(Role::System, t.clone())?,
            RequestMessage::User(t, pictures) => append_with(Role::User, t.clone(), pictures)?,
            RequestMessage::Assistant { text, calls } => {
                append(Role::Assistant, joined(text, &call_text(calls)))?
            }
            RequestMessage::Tool { name, text } => {
                append(Role::User, format!("[result of {name}]\n{text}"))?
            }
        }
    }
    append(
        Role::Assistant,
        joined(&reply.text, &call_text(&reply.calls)),
    )?;
    Ok(id)
}
