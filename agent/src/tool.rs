//! What a tool is to the model and to the UI: its name, a one-line description, the JSON
//! Schema of its arguments (see [`crate::schema`] for the subset), whether it writes (and so
//! is asked first), and its typed result. Results are plain data: `text_for_model` is text
//! the engine tokenizes as text, without parsing special tokens, so a file containing
//! `<end_of_turn>` or a tool-call marker cannot forge a turn or a call.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool's declaration, as the chat template and `companion tools list` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Borrowed for the built-in tools; owned for tools a client of the local API declares.
    pub name: Cow<'static, str>,
    /// One line: what the tool does, for the model and the user.
    pub description: Cow<'static, str>,
    /// JSON Schema (draft 2020-12 subset) of the arguments object.
    pub parameters: Value,
    /// Changes something (a note, a reminder, a file): asked first, every time unless the
    /// user said yes for the conversation.
    pub writes: bool,
}

/// A call of a tool by name with its arguments (a JSON object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            name: name.into(),
            arguments,
        }
    }
}

/// A tool's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// What goes back into the model's context: plain text, cut to the caps, saying so when
    /// cut.
    pub text_for_model: String,
    /// The same, structured, for the UI's cards.
    pub data: Value,
    /// Something was left out (a cap was reached); `text_for_model` says what and why.
    pub truncated: bool,
}

impl ToolOutput {
    pub(crate) fn new(text_for_model: String, data: Value, truncated: bool) -> Self {
        ToolOutput {
            text_for_model,
            data,
            truncated,
        }
    }
}

/// Where a long tool (summarize_file) is: `done` of `total` steps, with a short phrase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolProgress {
    pub tool: String,
    pub done: u64,
    pub total: Option<u64>,
    pub message: String,
    pub remaining_seconds: Option<f64>,
}

/// Whether `name` is 1 to `max_len` ASCII letters, digits, `_`, `-` or one of `extra`: the
/// names (of tools, of MCP servers) that are written into prompts and call syntax, where
/// nothing else may appear.
pub fn is_plain_name(name: &str, max_len: usize, extra: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || extra.contains(&b))
}
