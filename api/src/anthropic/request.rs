//! Anthropic's Messages request bodies read into [`chat::completion`]'s requests, as the
//! OpenAI side reads its own ([`crate::request`]): every parameter is honoured or refused with
//! a 400 naming it, except the few that only ask for what happens anyway (`metadata`, a
//! `cache_control` hint, `service_tier`, `thinking` disabled). The sampling fields and `seed`
//! are read at the top level of the body, where today's `anthropic` client puts them as extra
//! body fields (as clients of llama.cpp's endpoint do).
//!
//! The conversion follows llama.cpp's `server_chat_convert_anthropic_to_oai`: the system
//! blocks' texts joined, a user turn's `tool_result` blocks becoming tool messages, an
//! assistant turn's `tool_use` blocks its calls.

use agent::{Tool, ToolCall};
use chat::completion::{ChatRequest, OutputFormat, RequestMessage, ToolChoice};
use engine::{GenerateParams, SamplingParams};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::request::{
    client_tool, count, flag, list, model, object, refuse_unknown, sampling, string, with_roles,
    wrong_type,
};

/// `POST /v1/messages`, read.
#[derive(Debug, Clone)]
pub struct MessagesCall {
    pub model: String,
    pub stream: bool,
    pub request: ChatRequest,
}

/// What shapes the prompt: the keys `count_tokens` takes too.
const PROMPT_KEYS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "cache_control",
    "output_config",
];

/// What only a generation takes. `seed` is ours (as in the OpenAI dialect).
const GENERATION_KEYS: &[&str] = &[
    "max_tokens",
    "stop_sequences",
    "stream",
    "metadata",
    "service_tier",
    "temperature",
    "top_p",
    "top_k",
    "seed",
];

/// Pictures are read in a user's own message; anywhere else (a tool's result, the system
/// prompt) they are refused, never dropped.
const NO_IMAGES: &str = "pictures can be given in a user's own message only";

fn unsupported_block(at: &str, kind: &str) -> ApiError {
    if kind == "image" {
        return ApiError::unsupported(at, format!("`{at}`: {NO_IMAGES}"));
    }
    ApiError::unsupported(
        at,
        format!("`{at}`: content blocks of type `{kind}` are not supported"),
    )
}

/// The `type` of a content block.
fn block_type<'a>(block: &'a Value, at: &str) -> Result<&'a str, ApiError> {
    if !block.is_object() {
        return Err(wrong_type(at, "a content block object"));
    }
    block
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("`{at}` has no `type`")))
}

fn block_text<'a>(block: &'a Value, at: &str) -> Result<&'a str, ApiError> {
    block
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| wrong_type(&format!("{at}.text"), "a string"))
}

/// A string, or a list of text blocks joined (the system prompt, a tool's result).
fn text_or_blocks(value: Option<&Value>, at: &str) -> Result<String, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut text = String::new();
            for (i, block) in blocks.iter().enumerate() {
                let at = format!("{at}[{i}]");
                match block_type(block, &at)? {
                    "text" => text.push_str(block_text(block, &at)?),
                    other => return Err(unsupported_block(&at, other)),
                }
            }
            Ok(text)
        }
        Some(_) => Err(wrong_type(at, "a string or a list of text blocks")),
    }
}

/// The calls of earlier assistant turns by id: a `tool_result` names its call by id, the
/// call formats name the tool.
#[derive(Default)]
struct CallIds(Vec<(String, String)>);

impl CallIds {
    fn name_of(&self, id: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(cid, _)| cid == id)
            .map(|(_, name)| name.as_str())
    }
}

fn tool_use(block: &Value, at: &str, ids: &mut CallIds) -> Result<ToolCall, ApiError> {
    let name = block
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("`{at}` has no `name`")))?;
    let id = block.get("id").and_then(Value::as_str).unwrap_or("");
    let input = match block.get("input") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(wrong_type(&format!("{at}.input"), "an object")),
    };
    ids.0.push((id.to_string(), name.to_string()));
    Ok(ToolCall::new(name, input))
}

fn tool_result(block: &Value, at: &str, ids: &CallIds) -> Result<RequestMessage, ApiError> {
    let id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("`{at}` has no `tool_use_id`")))?;
    let name = ids.name_of(id).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{at}` answers no call: its `tool_use_id` is not the id of a `tool_use` block in an earlier assistant message"
        ))
    })?;
    let mut text = text_or_blocks(block.get("content"), &format!("{at}.content"))?;
    let is_error = match block.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(wrong_type(&format!("{at}.is_error"), "true or false")),
    };
    if is_error {
        // as the agent writes a tool's failure for the model
        text = format!("{name} failed: {text}");
    }
    Ok(RequestMessage::Tool {
        name: name.to_string(),
        text,
    })
}

/// One user turn: its text, and the tool results it carries (each its own message, in order).
fn user_turn(
    content: &Value,
    at: &str,
    ids: &CallIds,
    out: &mut Vec<RequestMessage>,
) -> Result<(), ApiError> {
    let Value::Array(blocks) = content else {
        out.push(RequestMessage::user(text_or_blocks(Some(content), at)?));
        return Ok(());
    };
    let mut text: Option<String> = None;
    let mut pictures = Vec::new();
    let mut results = 0;
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{at}[{i}]");
        match block_type(block, &at)? {
            "text" => text
                .get_or_insert_with(String::new)
                .push_str(block_text(block, &at)?),
            "image" => pictures.push(image_block(block, &at)?),
            "tool_result" => {
                // text before a result stays before it
                if text.is_some() || !pictures.is_empty() {
                    let t = text.take().unwrap_or_default();
                    out.push(RequestMessage::User(t, std::mem::take(&mut pictures)));
                }
                out.push(tool_result(block, &at, ids)?);
                results += 1;
            }
            other => return Err(unsupported_block(&at, other)),
        }
    }
    if text.is_some() || !pictures.is_empty() {
        out.push(RequestMessage::User(text.unwrap_or_default(), pictures));
    } else if results == 0 {
        out.push(RequestMessage::user(String::new()));
    }
    Ok(())
}

/// An `image` block: `source` is `{"type": "base64", "media_type", "data"}`; a `url` source
/// is refused, since Companion fetches nothing.
fn image_block(block: &Value, at: &str) -> Result<chat::Picture, ApiError> {
    let source = block
        .get("source")
        .ok_or_else(|| ApiError::bad_request(format!("`{at}` has no `source`")))?;
    let at = format!("{at}.source");
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let data = source
                .get("data")
                .and_then(Value::as_str)
                .ok_or_else(|| wrong_type(&format!("{at}.data"), "a base64 string"))?;
            let media_type = source.get("media_type").and_then(Value::as_str);
            crate::picture::from_base64(media_type, data, &at)
        }
        Some("url") => Err(ApiError::unsupported(
            &at,
            "Companion is offline and fetches nothing: give the picture itself, as a `base64` source",
        )),
        other => Err(ApiError::unsupported(
            &at,
            format!(
                "a picture's source of type `{}` is not supported (use `base64`)",
                other.unwrap_or("?")
            ),
        )),
    }
}

fn assistant_turn(
    content: &Value,
    at: &str,
    ids: &mut CallIds,
) -> Result<RequestMessage, ApiError> {
    let Value::Array(blocks) = content else {
        return Ok(RequestMessage::Assistant {
            text: text_or_blocks(Some(content), at)?,
            calls: Vec::new(),
        });
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{at}[{i}]");
        match block_type(block, &at)? {
            "text" => text.push_str(block_text(block, &at)?),
            "tool_use" => calls.push(tool_use(block, &at, ids)?),
            // another model's reasoning from an earlier turn: Anthropic's API leaves earlier
            // turns' thinking out of the context too
            "thinking" | "redacted_thinking" => {}
            other => return Err(unsupported_block(&at, other)),
        }
    }
    Ok(RequestMessage::Assistant { text, calls })
}

fn messages(value: Option<&Value>) -> Result<Vec<RequestMessage>, ApiError> {
    let messages = with_roles(value)?;
    let mut ids = CallIds::default();
    let mut out = Vec::new();
    for (at, role, m) in &messages {
        let content = m
            .get("content")
            .ok_or_else(|| ApiError::bad_request(format!("`{at}` has no `content`")))?;
        let in_content = format!("{at}.content");
        match *role {
            "user" => user_turn(content, &in_content, &ids, &mut out)?,
            "assistant" => out.push(assistant_turn(content, &in_content, &mut ids)?),
            other => {
                return Err(ApiError::unsupported(
                    &format!("{at}.role"),
                    format!(
                        "`{at}.role` is `{other}`: the roles are `user` and `assistant` (the system prompt is the top-level `system`)"
                    ),
                ));
            }
        }
    }
    // Anthropic's API would continue a final assistant message (a prefill); our engine would
    // start a new turn after it instead, which is not what was asked
    if messages
        .last()
        .is_some_and(|(_, role, _)| *role == "assistant")
    {
        return Err(ApiError::unsupported(
            "messages",
            "the last message is the assistant's: continuing it (prefill) is not supported; end with a user message",
        ));
    }
    Ok(out)
}

fn tools(value: Option<&Value>) -> Result<Vec<Tool>, ApiError> {
    let mut out = Vec::new();
    for (i, t) in list(value, "tools", "a list of tools")?.iter().enumerate() {
        let at = format!("tools[{i}]");
        match t.get("type").and_then(Value::as_str) {
            None | Some("custom") => {}
            Some(other) => {
                return Err(ApiError::unsupported(
                    &format!("{at}.type"),
                    format!(
                        "`{at}` is Anthropic's server tool `{other}`: only tools the client runs (name, description, input_schema) are supported"
                    ),
                ));
            }
        }
        let declared = t
            .as_object()
            .ok_or_else(|| wrong_type(&at, "a tool object"))?;
        out.push(client_tool(declared, &at, "input_schema")?);
    }
    Ok(out)
}

fn tool_choice(value: Option<&Value>) -> Result<ToolChoice, ApiError> {
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(ToolChoice::Auto);
    };
    let Some(choice) = v.as_object() else {
        return Err(wrong_type("tool_choice", "an object"));
    };
    // one call per reply is what we do anyway
    flag(choice, "disable_parallel_tool_use")?;
    match string(choice, "type")? {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Required),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => string(choice, "name")?
            .map(|n| ToolChoice::Function(n.to_string()))
            .ok_or_else(|| {
                ApiError::bad_request("`tool_choice` of type `tool` needs the tool's `name`")
            }),
        other => Err(ApiError::unsupported(
            "tool_choice",
            format!(
                "`tool_choice.type` `{}` is not one of auto, any, tool, none",
                other.unwrap_or("?")
            ),
        )),
    }
}

/// `output_config.format`: JSON under a schema's grammar, as OpenAI's `response_format`.
fn output_format(value: Option<&Value>) -> Result<OutputFormat, ApiError> {
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(OutputFormat::Text);
    };
    let Some(config) = v.as_object() else {
        return Err(wrong_type("output_config", "an object"));
    };
    for key in config.keys() {
        if key != "format" && !config[key].is_null() {
            return Err(ApiError::unsupported(
                &format!("output_config.{key}"),
                format!("`output_config.{key}` is not supported"),
            ));
        }
    }
    let Some(format) = config.get("format").filter(|f| !f.is_null()) else {
        return Ok(OutputFormat::Text);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => format
            .get("schema")
            .filter(|s| s.is_object())
            .map(|s| OutputFormat::JsonSchema(s.clone()))
            .ok_or_else(|| {
                ApiError::bad_request("`output_config.format.schema` must be a JSON Schema object")
            }),
        other => Err(ApiError::unsupported(
            "output_config.format",
            format!(
                "`output_config.format.type` `{}` is not `json_schema`",
                other.unwrap_or("?")
            ),
        )),
    }
}

/// The fields that ask for nothing we would do differently, checked for their shape only.
fn hints(map: &Map<String, Value>) -> Result<(), ApiError> {
    match map.get("metadata") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        Some(_) => return Err(wrong_type("metadata", "an object")),
    }
    match map.get("cache_control") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        Some(_) => return Err(wrong_type("cache_control", "an object")),
    }
    match string(map, "service_tier")? {
        None | Some("auto") | Some("standard_only") => {}
        Some(other) => {
            return Err(ApiError::unsupported(
                "service_tier",
                format!("`service_tier` `{other}` is not one of auto, standard_only"),
            ));
        }
    }
    match map.get("thinking") {
        None | Some(Value::Null) => {}
        Some(t) if t.get("type").and_then(Value::as_str) == Some("disabled") => {}
        Some(_) => {
            return Err(ApiError::unsupported(
                "thinking",
                "extended thinking is not supported by Companion's models: leave `thinking` out or disable it",
            ));
        }
    }
    Ok(())
}

fn stop_sequences(map: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let what = "a list of strings";
    let stops = list(map.get("stop_sequences"), "stop_sequences", what)?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| wrong_type("stop_sequences", what))?;
    if stops.iter().any(String::is_empty) {
        return Err(ApiError::bad_request(
            "`stop_sequences` may not hold an empty string",
        ));
    }
    Ok(stops)
}

/// The request as far as the prompt goes, with `params` for the rest.
fn prompt_request(
    map: &Map<String, Value>,
    params: GenerateParams,
) -> Result<ChatRequest, ApiError> {
    hints(map)?;
    let mut messages = messages(map.get("messages"))?;
    let system = text_or_blocks(map.get("system"), "system")?;
    if map.get("system").is_some_and(|s| !s.is_null()) {
        messages.insert(0, RequestMessage::System(system));
    }
    Ok(ChatRequest {
        messages,
        params,
        tools: tools(map.get("tools"))?,
        tool_choice: tool_choice(map.get("tool_choice"))?,
        format: output_format(map.get("output_config"))?,
    })
}

/// `POST /v1/messages`.
pub fn messages_call(body: &[u8]) -> Result<MessagesCall, ApiError> {
    let map = object(body)?;
    refuse_unknown(&map, &[PROMPT_KEYS, GENERATION_KEYS])?;
    let model = model(&map)?;
    let max_tokens = match count(&map, "max_tokens")? {
        None => {
            let mut e = ApiError::bad_request("`max_tokens` is required");
            e.param = Some("max_tokens".into());
            return Err(e);
        }
        Some(0) => return Err(ApiError::bad_request("`max_tokens` must be at least 1")),
        Some(m) => m.min(usize::MAX as u64) as usize,
    };
    let params = GenerateParams {
        max_tokens,
        sampling: sampling(&map)?,
        stop_strings: stop_sequences(&map)?,
        ignore_eos: false,
        // the server's own setting (`companion serve --speculate`), set by the handler
        speculation: Default::default(),
    };
    Ok(MessagesCall {
        model,
        stream: flag(&map, "stream")?.unwrap_or(false),
        request: prompt_request(&map, params)?,
    })
}

/// `POST /v1/messages/count_tokens`: the model and the request whose prompt is counted.
pub fn count_call(body: &[u8]) -> Result<(String, ChatRequest), ApiError> {
    let map = object(body)?;
    refuse_unknown(&map, &[PROMPT_KEYS])?;
    let model = model(&map)?;
    // nothing is generated: the sampling and the length only have to be valid
    let params = GenerateParams {
        max_tokens: 1,
        sampling: SamplingParams::default(),
        stop_strings: Vec::new(),
        ignore_eos: false,
        speculation: Default::default(),
    };
    Ok((model, prompt_request(&map, params)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(body: Value) -> Result<MessagesCall, ApiError> {
        messages_call(body.to_string().as_bytes())
    }

    fn user(text: &str) -> Value {
        json!([{"role": "user", "content": text}])
    }

    #[test]
    fn a_plain_request_takes_its_settings_from_the_top_level() {
        let c = call(json!({
            "model": "m", "max_tokens": 5, "messages": user("hi"),
            "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
            "stop_sequences": ["\n\n"], "stream": true, "metadata": {"user_id": "u1"},
            "temperature": 0.7, "top_p": 0.9, "top_k": 20, "seed": 42,
            "thinking": {"type": "disabled"}, "service_tier": "auto"
        }))
        .unwrap();
        assert!(c.stream);
        assert_eq!(c.model, "m");
        let p = &c.request.params;
        assert_eq!(p.max_tokens, 5);
        assert_eq!(p.stop_strings, vec!["\n\n".to_string()]);
        assert_eq!(p.sampling.temperature, 0.7);
        assert_eq!(p.sampling.top_p, 0.9);
        assert_eq!(p.sampling.top_k, 20);
        assert_eq!(p.sampling.seed, 42);
        assert_eq!(
            c.request.messages,
            vec![
                RequestMessage::System("Be brief.".into()),
                RequestMessage::user("hi")
            ]
        );
        assert_eq!(c.request.tool_choice, ToolChoice::Auto);
        assert_eq!(c.request.format, OutputFormat::Text);
    }

    #[test]
    fn tool_use_and_tool_result_become_calls_and_results_by_name() {
        let c = call(json!({
            "model": "m", "max_tokens": 64,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": [{"type": "text", "text": "sunny"}]},
                    {"type": "text", "text": "And tomorrow?"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such day", "is_error": true}
                ]}
            ],
            "tools": [{"name": "get_weather", "description": "Weather in a city",
                       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true}
        }))
        .unwrap();
        let r = &c.request;
        assert_eq!(r.tools.len(), 1);
        assert_eq!(r.tools[0].description, "Weather in a city");
        assert_eq!(r.tool_choice, ToolChoice::Function("get_weather".into()));
        assert_eq!(
            r.messages,
            vec![
                RequestMessage::user("weather?"),
                RequestMessage::Assistant {
                    text: "Looking.".into(),
                    calls: vec![ToolCall::new("get_weather", json!({"city": "Oslo"}))]
                },
                RequestMessage::Tool {
                    name: "get_weather".into(),
                    text: "sunny".into()
                },
                RequestMessage::user("And tomorrow?"),
                RequestMessage::Assistant {
                    text: String::new(),
                    calls: vec![ToolCall::new("get_weather", json!({}))]
                },
                RequestMessage::Tool {
                    name: "get_weather".into(),
                    text: "get_weather failed: no such day".into()
                },
            ]
        );
        r.check().unwrap();
    }

    #[test]
    fn tool_choices_map_onto_ours() {
        for (choice, want) in [
            (json!({"type": "auto"}), ToolChoice::Auto),
            (json!({"type": "any"}), ToolChoice::Required),
            (json!({"type": "none"}), ToolChoice::None),
            (json!(null), ToolChoice::Auto),
        ] {
            let c = call(json!({"model": "m", "max_tokens": 1, "messages": user("x"),
                                "tool_choice": choice}))
            .unwrap();
            assert_eq!(c.request.tool_choice, want);
        }
        for bad in [
            json!({"type": "tool"}),
            json!({"type": "sometimes"}),
            json!("auto"),
        ] {
            let e = call(json!({"model": "m", "max_tokens": 1, "messages": user("x"),
                                "tool_choice": bad}))
            .unwrap_err();
            assert_eq!(e.status, 400, "{e}");
        }
    }

    #[test]
    fn what_we_cannot_honour_is_refused_with_a_400_naming_it() {
        let base = || json!({"model": "m", "max_tokens": 8, "messages": user("hi")});
        for (key, value) in [
            ("min_p", json!(0.1)),
            ("frequency_penalty", json!(0.5)),
            (
                "thinking",
                json!({"type": "enabled", "budget_tokens": 1024}),
            ),
            ("service_tier", json!("priority")),
            ("container", json!("c")),
            ("stop_sequences", json!("\n")),
            ("output_config", json!({"effort": "high"})),
            (
                "tools",
                json!([{"type": "web_search_20250305", "name": "web_search"}]),
            ),
        ] {
            let mut body = base();
            body[key] = value;
            let e = call(body).unwrap_err();
            assert_eq!(e.status, 400, "{key}");
            assert!(
                e.message.contains(key) || e.param.as_deref().is_some_and(|p| p.contains(key)),
                "{key}: {e}"
            );
        }
        // max_tokens is required, as in Anthropic's API
        let mut body = base();
        body.as_object_mut().unwrap().remove("max_tokens");
        assert!(call(body).unwrap_err().message.contains("max_tokens"));
        // a role other than user and assistant
        let e = call(json!({"model": "m", "max_tokens": 8,
                            "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]}))
        .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("system"), "{e}");
        // a final assistant message would be continued by Anthropic, not by us
        let e = call(json!({"model": "m", "max_tokens": 8, "messages": [
            {"role": "user", "content": "x"}, {"role": "assistant", "content": "The answer is"}]}))
        .unwrap_err();
        assert!(e.message.contains("prefill"), "{e}");
        // a result that answers no call
        let e = call(
            json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}]}),
        )
        .unwrap_err();
        assert!(e.message.contains("answers no call"), "{e}");
        assert_eq!(messages_call(b"{not json").unwrap_err().status, 400);
        assert_eq!(messages_call(b"[1]").unwrap_err().status, 400);
    }

    #[test]
    fn pictures_are_read_in_a_user_message_and_refused_elsewhere() {
        use base64::Engine as _;
        const PNG: &[u8] = include_bytes!("../../../tests/fixtures/gemma3-vision/small.png");
        let data = base64::engine::general_purpose::STANDARD.encode(PNG);
        let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        let c = call(json!({"model": "m", "max_tokens": 8, "messages": [
            {"role": "user", "content": [image.clone(), {"type": "text", "text": "what is it?"}]}
        ]}))
        .unwrap();
        let [RequestMessage::User(text, pictures)] = c.request.messages.as_slice() else {
            panic!("one user message: {:?}", c.request.messages);
        };
        assert_eq!(text, "what is it?");
        assert_eq!(pictures.len(), 1);
        assert_eq!(pictures[0].bytes(), PNG);

        let in_a_result = json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [image.clone()]}]}
        ]);
        let e = call(json!({"model": "m", "max_tokens": 8, "messages": in_a_result})).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains(NO_IMAGES), "{e}");
        for (source, says) in [
            (
                json!({"type": "url", "url": "https://example.com/a.png"}),
                "offline",
            ),
            (
                json!({"type": "base64", "media_type": "image/png", "data": "!!"}),
                "not base64",
            ),
            (
                json!({"type": "base64", "media_type": "image/gif", "data": data}),
                "is image/png",
            ),
        ] {
            let block = json!({"type": "image", "source": source});
            let e = call(json!({"model": "m", "max_tokens": 8, "messages": [
                {"role": "user", "content": [block]}
            ]}))
            .unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(says), "{says}: {e}");
        }
    }

    #[test]
    fn odd_shapes_are_400s_never_panics() {
        for body in [
            json!({"model": "m", "max_tokens": 8, "messages": "hi"}),
            json!({"model": "m", "max_tokens": 8, "messages": [1, 2]}),
            json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user"}]}),
            json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [1]}]}),
            json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text"}]}]}),
            json!({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": 7}]}),
            json!({"model": "m", "max_tokens": -1, "messages": user("x")}),
            json!({"model": "m", "max_tokens": 0, "messages": user("x")}),
            json!({"model": "m", "max_tokens": 8, "messages": user("x"), "system": 3}),
            json!({"model": "m", "max_tokens": 8, "messages": user("x"), "tools": [{}]}),
            json!({"model": "m", "max_tokens": 8, "messages": user("x"), "seed": "s"}),
            json!({"model": "m", "max_tokens": 8, "messages": user("x"), "temperature": 9}),
            json!({"model": "m", "max_tokens": 8, "messages": user("x"), "metadata": 1}),
            json!({"max_tokens": 8, "messages": user("x")}),
        ] {
            assert_eq!(call(body.clone()).unwrap_err().status, 400, "{body}");
        }
    }

    #[test]
    fn counting_takes_the_prompt_fields_only() {
        let (model, r) = count_call(
            json!({"model": "m", "system": "s", "messages": user("hi"),
                   "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {}}}]})
            .to_string()
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(model, "m");
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.tools.len(), 1);
        r.check().unwrap();
        let e = count_call(
            json!({"model": "m", "messages": user("hi"), "max_tokens": 3})
                .to_string()
                .as_bytes(),
        )
        .unwrap_err();
        assert!(e.message.contains("max_tokens"), "{e}");
    }

    #[test]
    fn a_json_schema_output_is_a_grammar_as_on_the_openai_side() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let c = call(json!({"model": "m", "max_tokens": 8, "messages": user("x"),
                            "output_config": {"format": {"type": "json_schema", "schema": schema}}}))
        .unwrap();
        assert_eq!(c.request.format, OutputFormat::JsonSchema(schema));
    }
}
