//! OpenAI's request bodies read into [`chat::completion`]'s requests. Every parameter is
//! either honoured or refused with a 400 naming it: a client must never believe a setting
//! took effect when it did not. Parameters that only ask for what we do anyway (`n: 1`,
//! `logprobs: false`, `parallel_tool_calls`, where one call per reply is a valid answer)
//! are accepted with those values.

use std::borrow::Cow;

use agent::{Tool, ToolCall};
use chat::completion::{ChatRequest, OutputFormat, RequestMessage, ToolChoice};
use engine::{GenerateParams, SamplingParams};
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// What both endpoints share besides the prompt.
#[derive(Debug, Clone)]
pub struct Common {
    pub model: String,
    pub stream: bool,
    pub params: GenerateParams,
}

/// A chat completion request.
#[derive(Debug, Clone)]
pub struct ChatCall {
    pub common: Common,
    pub request: ChatRequest,
}

/// A text completion request.
#[derive(Debug, Clone)]
pub struct TextCall {
    pub common: Common,
    pub prompt: String,
}

const SAMPLING_KEYS: &[&str] = &[
    "model",
    "stream",
    "stream_options",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "stop",
    "n",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "user",
];

const CHAT_KEYS: &[&str] = &[
    "messages",
    "max_completion_tokens",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
];

const TEXT_KEYS: &[&str] = &["prompt", "echo", "suffix", "best_of"];

pub(crate) fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "the request body is not valid JSON: {e}"
        ))),
    }
}

/// A 400 naming the first key of `map` in none of the `known` lists: a parameter we do not
/// know is one we would silently not honour.
pub(crate) fn refuse_unknown(map: &Map<String, Value>, known: &[&[&str]]) -> Result<(), ApiError> {
    for key in map.keys() {
        if !known.iter().any(|list| list.contains(&key.as_str())) {
            return Err(ApiError::unsupported(
                key,
                format!("the parameter `{key}` is not supported by Companion's local API"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn wrong_type(key: &str, what: &str) -> ApiError {
    let mut e = ApiError::bad_request(format!("`{key}` must be {what}"));
    e.param = Some(key.to_string());
    e.code = Some("invalid_type".into());
    e
}

/// `key` as a number when present and not null.
pub(crate) fn number(map: &Map<String, Value>, key: &str) -> Result<Option<f64>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|f| f.is_finite())
            .map(Some)
            .ok_or_else(|| wrong_type(key, "a number")),
    }
}

pub(crate) fn count(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| wrong_type(key, "a whole number of at least 0")),
    }
}

pub(crate) fn flag(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong_type(key, "true or false")),
    }
}

pub(crate) fn string<'a>(
    map: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong_type(key, "a string")),
    }
}

/// A seed from the OS when the client gives none: unseeded requests differ, as OpenAI's and
/// llama.cpp's do; the same seed gives the same text.
fn fresh_seed() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    }
    u64::from_le_bytes(b)
}

/// `model`, which every request must name (both dialects: a client must not believe it
/// reached another model than the one served).
pub(crate) fn model(map: &Map<String, Value>) -> Result<String, ApiError> {
    Ok(string(map, "model")?
        .ok_or_else(|| {
            let mut e = ApiError::bad_request("`model` is required (GET /v1/models lists it)");
            e.param = Some("model".into());
            e
        })?
        .to_string())
}

/// The sampling fields present in `map` (the caller's list of accepted keys decides which may
/// be), over our defaults, with a fresh seed when none is given.
pub(crate) fn sampling(map: &Map<String, Value>) -> Result<SamplingParams, ApiError> {
    let defaults = SamplingParams::default();
    let mut sampling = SamplingParams {
        seed: fresh_seed(),
        ..defaults
    };
    if let Some(t) = number(map, "temperature")? {
        if !(0.0..=2.0).contains(&t) {
            return Err(ApiError::bad_request(
                "`temperature` must be between 0 and 2",
            ));
        }
        sampling.temperature = t as f32;
    }
    if let Some(p) = number(map, "top_p")? {
        sampling.top_p = p as f32;
    }
    if let Some(p) = number(map, "min_p")? {
        sampling.min_p = p as f32;
    }
    if let Some(k) = count(map, "top_k")? {
        sampling.top_k = k as usize;
    }
    if let Some(r) = number(map, "repeat_penalty")? {
        sampling.repetition_penalty = r as f32;
    }
    if let Some(p) = number(map, "presence_penalty")? {
        if !(-2.0..=2.0).contains(&p) {
            return Err(ApiError::bad_request(
                "`presence_penalty` must be between -2 and 2",
            ));
        }
        sampling.presence_penalty = p as f32;
    }
    match map.get("seed") {
        None | Some(Value::Null) => {}
        Some(v) => {
            sampling.seed = v
                .as_u64()
                .or_else(|| v.as_i64().map(|i| i as u64))
                .ok_or_else(|| wrong_type("seed", "an integer"))?;
        }
    }
    sampling
        .validate()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(sampling)
}

/// The parameters both endpoints share; `default_max` when `max_tokens` is absent.
fn common(
    map: &Map<String, Value>,
    max_keys: &[&str],
    default_max: usize,
) -> Result<Common, ApiError> {
    let model = model(map)?;
    let stream = flag(map, "stream")?.unwrap_or(false);
    match map.get("stream_options") {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) => {
            for (k, v) in o {
                // usage is in every reply anyway (the last chunk of a stream)
                if k != "include_usage" || !v.is_boolean() {
                    return Err(ApiError::unsupported(
                        "stream_options",
                        format!("`stream_options.{k}` is not supported"),
                    ));
                }
            }
        }
        Some(_) => return Err(wrong_type("stream_options", "an object")),
    }
    if let Some(n) = count(map, "n")?
        && n != 1
    {
        return Err(ApiError::unsupported(
            "n",
            "only `n: 1` is supported: one choice per request",
        ));
    }
    match map.get("logprobs") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        _ => {
            return Err(ApiError::unsupported(
                "logprobs",
                "log-probabilities are not returned by Companion's local API",
            ));
        }
    }
    if map.get("top_logprobs").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::unsupported(
            "top_logprobs",
            "log-probabilities are not returned by Companion's local API",
        ));
    }
    match map.get("logit_bias") {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) if o.is_empty() => {}
        _ => {
            return Err(ApiError::unsupported(
                "logit_bias",
                "`logit_bias` is not supported",
            ));
        }
    }
    if let Some(f) = number(map, "frequency_penalty")?
        && f != 0.0
    {
        return Err(ApiError::unsupported(
            "frequency_penalty",
            "`frequency_penalty` is not supported; use `presence_penalty` or `repeat_penalty`",
        ));
    }
    string(map, "user")?;

    let sampling = sampling(map)?;

    let mut max_tokens = default_max;
    for key in max_keys {
        if let Some(m) = count(map, key)? {
            if m == 0 {
                return Err(ApiError::bad_request(format!("`{key}` must be at least 1")));
            }
            max_tokens = m.min(usize::MAX as u64) as usize;
        }
    }
    let stop_strings = match map.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| wrong_type("stop", "a string or a list of strings"))?,
        Some(_) => return Err(wrong_type("stop", "a string or a list of strings")),
    };
    if stop_strings.len() > 4 || stop_strings.iter().any(String::is_empty) {
        return Err(ApiError::bad_request(
            "`stop` takes up to 4 strings, none of them empty",
        ));
    }
    Ok(Common {
        model,
        stream,
        params: GenerateParams {
            max_tokens,
            sampling,
            stop_strings,
            ignore_eos: false,
            // the server's own setting (`companion serve --speculate`), set by the handler
            speculation: Default::default(),
        },
    })
}

/// A message's `content`: a string, or a list of text parts.
fn content(value: Option<&Value>, at: &str) -> Result<String, ApiError> {
    let (text, pictures) = content_with_pictures(value, at)?;
    if !pictures.is_empty() {
        return Err(ApiError::unsupported(
            at,
            "only a user's message can hold pictures",
        ));
    }
    Ok(text)
}

/// A message's `content`: a string, or a list of text and `image_url` parts. The text parts
/// are joined; the pictures open the message, in their order (as Gemma's template places a
/// turn's pictures before its text).
fn content_with_pictures(
    value: Option<&Value>,
    at: &str,
) -> Result<(String, Vec<chat::Picture>), ApiError> {
    match value {
        None | Some(Value::Null) => Ok((String::new(), Vec::new())),
        Some(Value::String(s)) => Ok((s.clone(), Vec::new())),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            let mut pictures = Vec::new();
            for (i, part) in parts.iter().enumerate() {
                match (
                    part.get("type").and_then(Value::as_str),
                    part.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    (Some("image_url"), _) => {
                        let at = format!("{at}[{i}].image_url");
                        let url = match part.get("image_url") {
                            Some(Value::String(url)) => url.as_str(),
                            Some(v) => v.get("url").and_then(Value::as_str).ok_or_else(|| {
                                ApiError::bad_request(format!("`{at}` has no `url`"))
                            })?,
                            None => {
                                return Err(ApiError::bad_request(format!("`{at}` is missing")));
                            }
                        };
                        pictures.push(crate::picture::from_url(url, &at)?);
                    }
                    (kind, _) => {
                        return Err(ApiError::unsupported(
                            at,
                            format!(
                                "content parts of type `{}` are not supported: Companion reads text and pictures (`image_url`)",
                                kind.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok((text, pictures))
        }
        Some(_) => Err(wrong_type(at, "a string or a list of content parts")),
    }
}

fn tool_calls(value: &Value, at: &str) -> Result<Vec<(String, ToolCall)>, ApiError> {
    let Value::Array(items) = value else {
        return Err(wrong_type(at, "a list"));
    };
    let mut calls = Vec::new();
    for item in items {
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let function = item
            .get("function")
            .ok_or_else(|| ApiError::bad_request(format!("each of `{at}` needs a `function`")))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad_request(format!("a call in `{at}` has no name")))?;
        let arguments = match function.get("arguments") {
            Some(Value::String(s)) if s.trim().is_empty() => json!({}),
            Some(Value::String(s)) => serde_json::from_str(s).map_err(|e| {
                ApiError::bad_request(format!(
                    "the arguments of the call of `{name}` are not JSON: {e}"
                ))
            })?,
            Some(v @ Value::Object(_)) => v.clone(),
            None | Some(Value::Null) => json!({}),
            Some(_) => return Err(wrong_type(at, "calls whose `arguments` are a JSON string")),
        };
        calls.push((id, ToolCall::new(name, arguments)));
    }
    Ok(calls)
}

/// `messages`, each with where it is (`messages[i]`) and its `role`.
pub(crate) fn with_roles(value: Option<&Value>) -> Result<Vec<(String, &str, &Value)>, ApiError> {
    let Some(Value::Array(items)) = value else {
        return Err(wrong_type("messages", "a list of messages"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let at = format!("messages[{i}]");
            match m.get("role").and_then(Value::as_str) {
                Some(role) => Ok((at, role, m)),
                None => Err(ApiError::bad_request(format!("`{at}` has no `role`"))),
            }
        })
        .collect()
}

fn messages(value: Option<&Value>) -> Result<Vec<RequestMessage>, ApiError> {
    // a tool result names its call by id; the formats name the tool
    let mut call_names: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for (at, role, m) in with_roles(value)? {
        if role == "user" {
            let (text, pictures) =
                content_with_pictures(m.get("content"), &format!("{at}.content"))?;
            out.push(RequestMessage::User(text, pictures));
            continue;
        }
        let text = content(m.get("content"), &format!("{at}.content"))?;
        out.push(match role {
            "system" | "developer" => RequestMessage::System(text),
            "assistant" => {
                let calls = match m.get("tool_calls") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(v) => tool_calls(v, &format!("{at}.tool_calls"))?,
                };
                for (id, call) in &calls {
                    call_names.push((id.clone(), call.name.clone()));
                }
                RequestMessage::Assistant {
                    text,
                    calls: calls.into_iter().map(|(_, c)| c).collect(),
                }
            }
            "tool" => {
                let by_id = m.get("tool_call_id").and_then(Value::as_str).and_then(|id| {
                    call_names
                        .iter()
                        .find(|(cid, _)| cid == id)
                        .map(|(_, n)| n.clone())
                });
                let name = by_id
                    .or_else(|| m.get("name").and_then(Value::as_str).map(str::to_string))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "`{at}` answers no call: its `tool_call_id` is not the id of a call in an earlier assistant message"
                        ))
                    })?;
                RequestMessage::Tool { name, text }
            }
            other => {
                return Err(ApiError::unsupported(
                    &format!("{at}.role"),
                    format!("the role `{other}` is not supported (system, developer, user, assistant, tool)"),
                ));
            }
        });
    }
    Ok(out)
}

/// An optional list: its items, none when absent or null.
pub(crate) fn list<'a>(
    value: Option<&'a Value>,
    key: &str,
    what: &str,
) -> Result<&'a [Value], ApiError> {
    match value {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(wrong_type(key, what)),
    }
}

fn tools(value: Option<&Value>) -> Result<Vec<Tool>, ApiError> {
    let mut out = Vec::new();
    for (i, t) in list(value, "tools", "a list of tools")?.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::unsupported(
                &format!("tools[{i}].type"),
                "only tools of `\"type\": \"function\"` are supported",
            ));
        }
        let f = t
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                ApiError::bad_request(format!("`tools[{i}]` has no `function` object"))
            })?;
        out.push(client_tool(
            f,
            &format!("tools[{i}].function"),
            "parameters",
        )?);
    }
    Ok(out)
}

/// A tool a client declares at `at`: its `name`, `description` and the schema under
/// `schema_key` (without one it takes no arguments).
pub(crate) fn client_tool(
    declared: &Map<String, Value>,
    at: &str,
    schema_key: &str,
) -> Result<Tool, ApiError> {
    let name = string(declared, "name")?
        .ok_or_else(|| ApiError::bad_request(format!("`{at}` has no `name`")))?;
    Ok(Tool {
        name: Cow::Owned(name.to_string()),
        description: Cow::Owned(string(declared, "description")?.unwrap_or("").to_string()),
        parameters: declared
            .get(schema_key)
            .filter(|s| !s.is_null())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        // the client runs its own tools; nothing is run here
        writes: false,
    })
}

fn tool_choice(value: Option<&Value>) -> Result<ToolChoice, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(ToolChoice::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "none" => Ok(ToolChoice::None),
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            other => Err(ApiError::unsupported(
                "tool_choice",
                format!("`tool_choice` `{other}` is not one of none, auto, required"),
            )),
        },
        Some(v) => v
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .map(|n| ToolChoice::Function(n.to_string()))
            .ok_or_else(|| {
                wrong_type(
                    "tool_choice",
                    "none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}",
                )
            }),
    }
}

fn response_format(value: Option<&Value>) -> Result<OutputFormat, ApiError> {
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(OutputFormat::Text);
    };
    match v.get("type").and_then(Value::as_str) {
        Some("text") => Ok(OutputFormat::Text),
        Some("json_object") => Ok(OutputFormat::JsonObject),
        Some("json_schema") => {
            let schema = v
                .get("json_schema")
                .and_then(|s| s.get("schema"))
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "`response_format.json_schema.schema` must be a JSON Schema object",
                    )
                })?;
            Ok(OutputFormat::JsonSchema(schema.clone()))
        }
        other => Err(ApiError::unsupported(
            "response_format",
            format!(
                "`response_format` `{}` is not one of text, json_object, json_schema",
                other.unwrap_or("?")
            ),
        )),
    }
}

/// `POST /v1/chat/completions`. Without `max_tokens` the reply may fill the context.
pub fn chat_call(body: &[u8]) -> Result<ChatCall, ApiError> {
    let map = object(body)?;
    refuse_unknown(&map, &[SAMPLING_KEYS, CHAT_KEYS])?;
    let common = common(&map, &["max_tokens", "max_completion_tokens"], usize::MAX)?;
    flag(&map, "parallel_tool_calls")?;
    let request = ChatRequest {
        messages: messages(map.get("messages"))?,
        params: common.params.clone(),
        tools: tools(map.get("tools"))?,
        tool_choice: tool_choice(map.get("tool_choice"))?,
        format: response_format(map.get("response_format"))?,
    };
    Ok(ChatCall { common, request })
}

/// `POST /v1/completions`. Without `max_tokens`, 16 tokens, as OpenAI's default.
pub fn text_call(body: &[u8]) -> Result<TextCall, ApiError> {
    let map = object(body)?;
    refuse_unknown(&map, &[SAMPLING_KEYS, TEXT_KEYS])?;
    let common = common(&map, &["max_tokens"], 16)?;
    if flag(&map, "echo")? == Some(true) {
        return Err(ApiError::unsupported("echo", "`echo` is not supported"));
    }
    if string(&map, "suffix")?.is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::unsupported(
            "suffix",
            "`suffix` (insertion) is not supported",
        ));
    }
    if let Some(b) = count(&map, "best_of")?
        && b != 1
    {
        return Err(ApiError::unsupported(
            "best_of",
            "only `best_of: 1` is supported",
        ));
    }
    let prompt = match map.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            items[0].as_str().unwrap_or_default().to_string()
        }
        Some(Value::Array(_)) => {
            return Err(ApiError::unsupported(
                "prompt",
                "`prompt` takes one string (a list of prompts or of token ids is not supported)",
            ));
        }
        _ => return Err(wrong_type("prompt", "a string")),
    };
    Ok(TextCall { common, prompt })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: Value) -> Result<ChatCall, ApiError> {
        chat_call(body.to_string().as_bytes())
    }

    #[test]
    fn a_plain_request_takes_our_defaults_and_its_settings() {
        let c = chat(json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0, "seed": 7, "max_tokens": 5, "stop": "\n", "stream": true,
            "stream_options": {"include_usage": true}, "n": 1, "logprobs": false
        }))
        .unwrap();
        assert!(c.common.stream);
        assert_eq!(c.request.params.max_tokens, 5);
        assert_eq!(c.request.params.sampling.temperature, 0.0);
        assert_eq!(c.request.params.sampling.seed, 7);
        assert_eq!(c.request.params.stop_strings, vec!["\n".to_string()]);
        assert_eq!(
            c.request.params.sampling.top_k,
            SamplingParams::default().top_k
        );
        assert_eq!(c.request.messages, vec![RequestMessage::user("hi")]);
        assert_eq!(c.request.tool_choice, ToolChoice::Auto);
    }

    #[test]
    fn parameters_we_cannot_honour_are_refused_by_name() {
        let base = || json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        for (key, value) in [
            ("n", json!(2)),
            ("logprobs", json!(true)),
            ("frequency_penalty", json!(0.5)),
            ("logit_bias", json!({"1": 2})),
            ("functions", json!([])),
            ("audio", json!({})),
            ("response_format", json!({"type": "grammar"})),
            ("tool_choice", json!("sometimes")),
        ] {
            let mut body = base();
            body[key] = value;
            let e = chat(body).unwrap_err();
            assert_eq!(e.status, 400, "{key}");
            assert!(
                e.message.contains(key) || e.param.as_deref() == Some(key),
                "{key}: {e}"
            );
        }
        let e = chat(
            json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
            ]}]}),
        )
        .unwrap_err();
        assert!(e.message.contains("input_audio"), "{e}");
        assert_eq!(
            chat(json!({"messages": []})).unwrap_err().param.as_deref(),
            Some("model")
        );
        assert_eq!(chat_call(b"{not json").unwrap_err().status, 400);
    }

    #[test]
    fn tools_calls_and_results_are_read_with_their_names() {
        let c = chat(json!({
            "model": "m",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "description": "Weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": false
        }))
        .unwrap();
        assert_eq!(c.request.tools.len(), 1);
        assert_eq!(c.request.tools[0].name, "get_weather");
        assert_eq!(
            c.request.tool_choice,
            ToolChoice::Function("get_weather".into())
        );
        assert_eq!(
            c.request.messages[1],
            RequestMessage::Assistant {
                text: String::new(),
                calls: vec![ToolCall::new("get_weather", json!({"city": "Oslo"}))]
            }
        );
        assert_eq!(
            c.request.messages[2],
            RequestMessage::Tool {
                name: "get_weather".into(),
                text: "sunny".into()
            }
        );
        // a result that answers no call is refused
        let e = chat(json!({"model": "m", "messages": [
            {"role": "tool", "tool_call_id": "nope", "content": "x"}]}))
        .unwrap_err();
        assert!(e.message.contains("answers no call"), "{e}");
    }

    #[test]
    fn text_completions_default_to_sixteen_tokens_and_one_prompt() {
        let t = text_call(
            json!({"model": "m", "prompt": "Once"})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(t.common.params.max_tokens, 16);
        assert_eq!(t.prompt, "Once");
        for bad in [
            json!({"model": "m", "prompt": ["a", "b"]}),
            json!({"model": "m", "prompt": "a", "echo": true}),
            json!({"model": "m", "prompt": [1, 2]}),
            json!({"model": "m", "prompt": "a", "messages": []}),
        ] {
            assert_eq!(
                text_call(bad.to_string().as_bytes()).unwrap_err().status,
                400
            );
        }
    }

    const PNG: &[u8] = include_bytes!("../../tests/fixtures/gemma3-vision/small.png");

    fn with_picture(url: &str) -> Value {
        json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in it?"},
            {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}
        ]}]})
    }

    #[test]
    fn a_picture_comes_as_a_data_url_and_nothing_is_fetched() {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(PNG);
        let c = chat(with_picture(&format!("data:image/png;base64,{data}"))).unwrap();
        let [RequestMessage::User(text, pictures)] = c.request.messages.as_slice() else {
            panic!("one user message: {:?}", c.request.messages);
        };
        assert_eq!(text, "What is in it?");
        assert_eq!(pictures.len(), 1);
        assert_eq!(pictures[0].bytes(), PNG);
        assert_eq!(pictures[0].media_type(), "image/png");

        for (url, says) in [
            ("https://example.com/cat.png", "offline"),
            ("file:///etc/passwd", "offline"),
            ("data:image/png,rawbytes", "base64"),
            ("data:image/png;base64,@@@@", "not base64"),
            (&format!("data:image/jpeg;base64,{data}"), "is image/png"),
            ("data:image/png;base64,aGVsbG8=", "not a picture"),
        ] {
            let e = chat(with_picture(url)).unwrap_err();
            assert_eq!(e.status, 400, "{url}");
            assert!(e.message.contains(says), "{url}: {e}");
        }
        // a picture in anything but a user's message is refused, not dropped
        let e = chat(json!({"model": "m", "messages": [
            {"role": "system", "content": [
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}
            ]},
            {"role": "user", "content": "hi"}
        ]}))
        .unwrap_err();
        assert!(e.message.contains("user"), "{e}");
    }
}
