//! What a client asks for, checked before any token is generated.

use agent::calls::Entry;
use agent::{Tool, ToolCall};
use engine::{ChatMessage, GenerateParams};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::picture::Picture;

/// One message of a client's conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestMessage {
    System(String),
    /// A user's message: its text, and the pictures that open it.
    User(String, Vec<Picture>),
    /// The model's earlier turn: its text, and the calls it made (answered by `Tool`
    /// messages after it).
    Assistant {
        text: String,
        calls: Vec<ToolCall>,
    },
    /// A tool's result, answering a call of `name`.
    Tool {
        name: String,
        text: String,
    },
}

impl RequestMessage {
    /// A user's message of text alone.
    pub fn user(text: impl Into<String>) -> Self {
        RequestMessage::User(text.into(), Vec::new())
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// Never call (the tools are still declared).
    None,
    /// Call when the model opens a call.
    #[default]
    Auto,
    /// Call one of the tools now.
    Required,
    /// Call this tool now.
    Function(String),
}

/// The shape of the model's text.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON that fits this JSON Schema.
    JsonSchema(Value),
}

#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<RequestMessage>,
    pub params: GenerateParams,
    pub tools: Vec<Tool>,
    pub tool_choice: ToolChoice,
    pub format: OutputFormat,
}

/// Tool names as OpenAI's API admits them (letters, digits, `_` and `-`, at most 64): they
/// are written into the prompt and into call syntax, so nothing else may be in them.
pub fn check_tool_name(name: &str) -> Result<()> {
    let ok = agent::tool::is_plain_name(name, 64, b"");
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "the tool name `{name}` is not allowed: use 1-64 letters, digits, `_` or `-`"
        )))
    }
}

pub(super) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidRequest(message.into())
}

impl ChatRequest {
    /// Everything that can be refused before generating: no messages, a tool whose name or
    /// schema we cannot declare, a choice naming no tool, tools together with a JSON format.
    pub fn check(&self) -> Result<()> {
        if self.messages.is_empty() {
            return Err(invalid("`messages` is empty: send at least one message"));
        }
        self.params
            .sampling
            .validate()
            .map_err(|e| invalid(e.to_string()))?;
        if self.params.max_tokens == 0 {
            return Err(invalid("`max_tokens` must be at least 1"));
        }
        if self.has_pictures() && self.uses_tools() {
            return Err(invalid(
                "pictures and tools in one request are not supported yet: send the pictures without tools",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for tool in &self.tools {
            check_tool_name(&tool.name)?;
            if !seen.insert(tool.name.as_ref()) {
                return Err(invalid(format!(
                    "the tool `{}` is declared twice",
                    tool.name
                )));
            }
            agent::schema::check_subset(&tool.parameters).map_err(|problem| {
                invalid(format!(
                    "the parameters of the tool `{}` use JSON Schema that Companion cannot enforce: {problem}",
                    tool.name
                ))
            })?;
            if tool.parameters.get("type").and_then(Value::as_str) != Some("object") {
                return Err(invalid(format!(
                    "the parameters of the tool `{}` must be a schema of `\"type\": \"object\"`",
                    tool.name
                )));
            }
        }
        match &self.tool_choice {
            ToolChoice::Required if self.tools.is_empty() => {
                return Err(invalid(
                    "`tool_choice` is `required` but no tools are given",
                ));
            }
            ToolChoice::Function(name) if !self.tools.iter().any(|t| t.name == *name) => {
                return Err(invalid(format!(
                    "`tool_choice` names `{name}`, which is not among the tools"
                )));
            }
            _ => {}
        }
        if self.calls_possible() && self.format != OutputFormat::Text {
            return Err(invalid(
                "`response_format` other than text cannot be combined with tools the model may call",
            ));
        }
        Ok(())
    }

    /// Whether this request may end in a call.
    pub fn calls_possible(&self) -> bool {
        !self.tools.is_empty() && self.tool_choice != ToolChoice::None
    }

    /// Whether the prompt needs the agent's transcript (tools declared, or calls and results
    /// in the history) rather than the plain chat template.
    /// Whether a user message holds pictures.
    pub fn has_pictures(&self) -> bool {
        self.messages
            .iter()
            .any(|m| matches!(m, RequestMessage::User(_, p) if !p.is_empty()))
    }

    pub(super) fn uses_tools(&self) -> bool {
        !self.tools.is_empty()
            || self.messages.iter().any(|m| {
                matches!(m, RequestMessage::Tool { .. })
                    || matches!(m, RequestMessage::Assistant { calls, .. } if !calls.is_empty())
            })
    }

    /// The messages for the chat template (no tools anywhere).
    pub(super) fn chat_messages(&self) -> Vec<ChatMessage> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                RequestMessage::System(t) => Some(ChatMessage::system(t.clone())),
                RequestMessage::User(t, pictures) => Some(
                    ChatMessage::user(t.clone())
                        .with_images(pictures.iter().map(|p| p.image().clone()).collect()),
                ),
                RequestMessage::Assistant { text, .. } => {
                    Some(ChatMessage::assistant(text.clone()))
                }
                RequestMessage::Tool { .. } => None,
            })
            .collect()
    }

    /// The messages as the agent's transcript; an assistant turn with several calls becomes
    /// one entry per call, as the formats write one call per step.
    pub(super) fn entries(&self) -> Vec<Entry> {
        let mut entries = Vec::new();
        for m in &self.messages {
            match m {
                RequestMessage::System(t) => entries.push(Entry::System(t.clone())),
                // pictures never come with tools (`check`)
                RequestMessage::User(t, _) => entries.push(Entry::User(t.clone())),
                RequestMessage::Assistant { text, calls } if calls.is_empty() => {
                    entries.push(Entry::Model {
                        text: text.clone(),
                        call: None,
                    })
                }
                RequestMessage::Assistant { text, calls } => {
                    for (i, call) in calls.iter().enumerate() {
                        entries.push(Entry::Model {
                            text: if i == 0 { text.clone() } else { String::new() },
                            call: Some(call.clone()),
                        });
                    }
                }
                RequestMessage::Tool { name, text } => entries.push(Entry::ToolResult {
                    tool: name.clone(),
                    text: text.clone(),
                }),
            }
        }
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: Value) -> Tool {
        Tool {
            name: name.to_string().into(),
            description: "a tool".into(),
            parameters,
            writes: false,
        }
    }

    fn request(tools: Vec<Tool>, tool_choice: ToolChoice, format: OutputFormat) -> ChatRequest {
        ChatRequest {
            messages: vec![RequestMessage::user("hi")],
            params: GenerateParams::default(),
            tools,
            tool_choice,
            format,
        }
    }

    #[test]
    fn tool_names_are_what_openai_admits() {
        for ok in ["get_weather", "getWeather", "file-search", "a"] {
            check_tool_name(ok).unwrap();
        }
        for bad in ["", "has space", "a{b", "x".repeat(65).as_str(), "ünïcode"] {
            assert!(check_tool_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_we_cannot_honour_are_refused_before_generating() {
        let object = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let ok = request(
            vec![tool("get_weather", object.clone())],
            ToolChoice::Function("get_weather".into()),
            OutputFormat::Text,
        );
        ok.check().unwrap();

        let cases = [
            request(vec![], ToolChoice::Required, OutputFormat::Text),
            request(
                vec![tool("a", object.clone())],
                ToolChoice::Function("b".into()),
                OutputFormat::Text,
            ),
            request(
                vec![tool(
                    "a",
                    json!({"type": "object", "patternProperties": {}}),
                )],
                ToolChoice::Auto,
                OutputFormat::Text,
            ),
            request(
                vec![tool("a", json!({"type": "string"}))],
                ToolChoice::Auto,
                OutputFormat::Text,
            ),
            request(
                vec![tool("a", object.clone()), tool("a", object.clone())],
                ToolChoice::Auto,
                OutputFormat::Text,
            ),
            request(
                vec![tool("a", object.clone())],
                ToolChoice::Auto,
                OutputFormat::JsonObject,
            ),
        ];
        for case in cases {
            let e = case.check().unwrap_err();
            assert_eq!(e.code(), "invalid_request", "{e}");
        }
        // declared but never called: a JSON format is fine
        request(
            vec![tool("a", object)],
            ToolChoice::None,
            OutputFormat::JsonObject,
        )
        .check()
        .unwrap();
        let mut empty = request(vec![], ToolChoice::Auto, OutputFormat::Text);
        empty.messages.clear();
        assert!(empty.check().is_err());
    }

    #[test]
    fn an_assistant_turn_with_two_calls_is_one_entry_per_call() {
        let mut r = request(vec![], ToolChoice::Auto, OutputFormat::Text);
        r.messages.push(RequestMessage::Assistant {
            text: "looking".into(),
            calls: vec![
                ToolCall::new("a", json!({})),
                ToolCall::new("b", json!({"x": 1})),
            ],
        });
        r.messages.push(RequestMessage::Tool {
            name: "a".into(),
            text: "A".into(),
        });
        assert!(r.uses_tools());
        let entries = r.entries();
        assert_eq!(entries.len(), 4);
        assert!(
            matches!(&entries[1], Entry::Model { text, call: Some(c) } if text == "looking" && c.name == "a")
        );
        assert!(
            matches!(&entries[2], Entry::Model { text, call: Some(c) } if text.is_empty() && c.name == "b")
        );
        assert_eq!(
            r.chat_messages().len(),
            2,
            "tool results have no place in the plain template"
        );
    }
}
