//! Tool calls in the model's own format: how the enabled tools are declared in the prompt,
//! how a call and its result are written in the transcript, the grammar a call must follow
//! (for constrained decoding), and reading a decoded call back. Rendering gives
//! [`Piece`]s — control tokens by name and plain text — so that the glue (`chat`) tokenizes
//! text, tool results above all, as data that can never become a control token.
//!
//! - Gemma 1-3 ([`CallFormat::FencedJson`]): these models have no tool tokens. Google's
//!   "Function calling with Gemma" guide (ai.google.dev/gemma/docs/capabilities/function-calling)
//!   declares the functions as JSON in the first user turn and asks for a call as
//!   `{"name": function name, "parameters": dictionary of argument name and its value}`; we
//!   take that JSON variant and wrap it in a ```` ```tool_code ```` fence (the fence Google's
//!   Gemma function-calling examples use, with ```` ```tool_output ```` for results) so that
//!   a call has an opener the agent loop can wait for: the grammar is lazy, as llama.cpp's
//!   lazy grammars are, and only constrains what follows the opener.
//! - Gemma 4 ([`CallFormat::Gemma4`]): its own tokens, `<|tool>` declarations in the system
//!   turn, `<|tool_call>call:NAME{…}<tool_call|>` calls and
//!   `<|tool_response>response:NAME{…}<tool_response|>` results in the model's turn, with
//!   strings between `<|"|>` tokens (Gemma 4's chat template).

mod fenced;
mod gemma4;
mod grammar;
mod json;
mod partial;

use serde_json::Value;

use crate::tool::{Tool, ToolCall};

pub use grammar::call_grammar;
pub use json::{any_object_schema, json_rule};
pub use partial::{PartialCall, partial_call};

/// How calls are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFormat {
    /// Gemma 1-3: a ```` ```tool_code ```` fence holding `{"name": …, "parameters": {…}}`.
    FencedJson,
    /// Gemma 4's `<|tool_call>` tokens.
    Gemma4,
}

/// A piece of a rendered prompt: a control token by its text in the vocabulary, or text that
/// is tokenized as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Control(&'static str),
    Text(String),
}

/// One entry of an agent's transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// The system text (the user's system prompt); the tool declarations are added to it.
    System(String),
    User(String),
    /// The model's turn: its text, then the call it decoded, if any.
    Model {
        text: String,
        call: Option<ToolCall>,
    },
    /// A tool's result (or the error a call met), answering the call just before it.
    ToolResult {
        tool: String,
        text: String,
    },
}

/// What ends the model's free text and starts a call: the loop stops generating there and
/// goes on under the call grammar.
pub fn call_opener(format: CallFormat) -> &'static str {
    match format {
        CallFormat::FencedJson => fenced::OPENER,
        CallFormat::Gemma4 => gemma4::CALL_OPEN,
    }
}

/// The opener as pieces, for a prompt that forces a call.
pub fn opener_pieces(format: CallFormat) -> Vec<Piece> {
    match format {
        CallFormat::FencedJson => vec![Piece::Text(fenced::OPENER.to_string())],
        CallFormat::Gemma4 => vec![Piece::Control(gemma4::CALL_OPEN)],
    }
}

/// `call` with its arguments in the order of its tool's schema (the order the grammar
/// admits them in: llguidance writes a JSON object's properties in schema order).
pub fn in_schema_order(tools: &[Tool], call: &ToolCall) -> ToolCall {
    let (Some(tool), Value::Object(args)) =
        (tools.iter().find(|t| t.name == call.name), &call.arguments)
    else {
        return call.clone();
    };
    let mut ordered = serde_json::Map::new();
    if let Some(props) = tool.parameters.get("properties").and_then(Value::as_object) {
        for key in props.keys() {
            if let Some(v) = args.get(key) {
                ordered.insert(key.clone(), v.clone());
            }
        }
    }
    for (k, v) in args {
        if !ordered.contains_key(k) {
            ordered.insert(k.clone(), v.clone());
        }
    }
    ToolCall::new(call.name.clone(), Value::Object(ordered))
}

/// A call as the model writes it after the opener, to its end, arguments in schema order.
pub fn call_pieces(format: CallFormat, tools: &[Tool], call: &ToolCall) -> Vec<Piece> {
    let call = &in_schema_order(tools, call);
    match format {
        CallFormat::FencedJson => {
            let text = fenced::call_text(call);
            vec![Piece::Text(
                text.strip_prefix(fenced::OPENER)
                    .unwrap_or(&text)
                    .to_string(),
            )]
        }
        CallFormat::Gemma4 => gemma4::call_pieces(call),
    }
}

/// Render `entries` with `tools` declared. With `open_model_turn`, ends where the model
/// writes next: in a new model turn, or — after a tool result in Gemma 4, whose results live
/// inside the model's turn — right after the result.
pub fn render(
    format: CallFormat,
    tools: &[Tool],
    entries: &[Entry],
    open_model_turn: bool,
) -> Vec<Piece> {
    match format {
        CallFormat::FencedJson => fenced::render(tools, entries, open_model_turn),
        CallFormat::Gemma4 => gemma4::render(tools, entries, open_model_turn),
    }
}

/// Read a call from what the model decoded after the opener (the call's body and its end).
/// Checks the syntax, the tool's name among `tools`, and its arguments against the tool's
/// schema; `Err` is a sentence for the model's tool result.
pub fn parse_call(format: CallFormat, tools: &[Tool], body: &str) -> Result<ToolCall, String> {
    let call = match format {
        CallFormat::FencedJson => fenced::parse(body)?,
        CallFormat::Gemma4 => gemma4::parse(body)?,
    };
    let Some(tool) = tools.iter().find(|t| t.name == call.name) else {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        return Err(format!(
            "there is no tool named `{}` (the tools are {})",
            call.name,
            names.join(", ")
        ));
    };
    crate::schema::validate(&tool.parameters, &call.arguments)
        .map_err(|problem| format!("{}: {problem}", tool.name))?;
    Ok(call)
}

/// A tool's declaration as the prompt shows it: name, description and argument schema.
fn declaration(tool: &Tool) -> Value {
    serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    })
}

/// Tool results are data: a result's text may not end the fence or the block it is shown in,
/// so runs of three backticks are broken up (a zero-width space after the first) and the
/// result says where it came from. Special-token text in it stays text: the glue tokenizes
/// every [`Piece::Text`] as data.
fn neutralize_fences(text: &str) -> String {
    text.replace("```", "`\u{200b}``")
}
