//! OpenAI's response bodies: whole (`chat.completion`, `text_completion`) and as stream
//! chunks, with usage counts in every reply (the last chunk of a stream carries them).

use chat::completion::{Completion, Finish};
use serde_json::{Value, json};

/// What every body of one reply shares.
#[derive(Debug, Clone)]
pub struct ReplyContext {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub chat: bool,
}

pub fn finish_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop | Finish::Cancelled => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
    }
}

pub fn usage(c: &Completion) -> Value {
    json!({
        "prompt_tokens": c.prompt_tokens,
        "completion_tokens": c.completion_tokens,
        "total_tokens": c.prompt_tokens + c.completion_tokens,
    })
}

/// The calls as OpenAI writes them: arguments as a JSON string, an id per call. A call cut
/// short (with `finish_reason: "length"`) is written as far as it got, as OpenAI's API
/// returns one: its arguments may not parse.
fn tool_calls(ctx: &ReplyContext, c: &Completion, with_index: bool) -> Value {
    let whole = c
        .calls
        .iter()
        .map(|call| (call.name.as_str(), call.arguments.to_string()));
    let partial = c
        .partial_call
        .iter()
        .map(|call| (call.name.as_str(), call.arguments.clone()));
    Value::Array(
        whole
            .chain(partial)
            .enumerate()
            .map(|(i, (name, arguments))| {
                let mut v = json!({
                    "id": format!("call_{}_{i}", ctx.id.trim_start_matches("chatcmpl-")),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                });
                if with_index {
                    v["index"] = json!(i);
                }
                v
            })
            .collect(),
    )
}

/// Whether the reply has calls to write, whole or cut short.
fn has_calls(c: &Completion) -> bool {
    !c.calls.is_empty() || c.partial_call.is_some()
}

/// A whole reply.
pub fn whole(ctx: &ReplyContext, c: &Completion) -> Value {
    let finish = finish_reason(c.finish);
    if !ctx.chat {
        return json!({
            "id": ctx.id, "object": "text_completion", "created": ctx.created, "model": ctx.model,
            "choices": [{"index": 0, "text": c.text, "logprobs": null, "finish_reason": finish}],
            "usage": usage(c),
        });
    }
    let mut message = json!({
        "role": "assistant",
        "content": if c.text.is_empty() && has_calls(c) { Value::Null } else { json!(c.text) },
    });
    if has_calls(c) {
        message["tool_calls"] = tool_calls(ctx, c, false);
    }
    json!({
        "id": ctx.id, "object": "chat.completion", "created": ctx.created, "model": ctx.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage(c),
    })
}

fn chunk(ctx: &ReplyContext, choice: Value, usage: Option<Value>) -> Value {
    let mut v = json!({
        "id": ctx.id,
        "object": if ctx.chat { "chat.completion.chunk" } else { "text_completion" },
        "created": ctx.created,
        "model": ctx.model,
        "choices": [choice],
    });
    if let Some(u) = usage {
        v["usage"] = u;
    }
    v
}

/// The first chunk of a chat stream: the role, before any text.
pub fn opening(ctx: &ReplyContext) -> Option<Value> {
    ctx.chat.then(|| {
        chunk(
            ctx,
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
            None,
        )
    })
}

/// A piece of text as it streams.
pub fn text_piece(ctx: &ReplyContext, text: &str) -> Value {
    if ctx.chat {
        chunk(
            ctx,
            json!({"index": 0, "delta": {"content": text}, "finish_reason": null}),
            None,
        )
    } else {
        chunk(
            ctx,
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": null}),
            None,
        )
    }
}

/// The chunks that end a stream: the calls (whole: their bodies were decoded under the
/// grammar, not streamed), then the finish reason with the usage.
pub fn closing(ctx: &ReplyContext, c: &Completion) -> Vec<Value> {
    let mut out = Vec::new();
    if ctx.chat && has_calls(c) {
        out.push(chunk(
            ctx,
            json!({"index": 0, "delta": {"tool_calls": tool_calls(ctx, c, true)}, "finish_reason": null}),
            None,
        ));
    }
    let finish = finish_reason(c.finish);
    let choice = if ctx.chat {
        json!({"index": 0, "delta": {}, "finish_reason": finish})
    } else {
        json!({"index": 0, "text": "", "logprobs": null, "finish_reason": finish})
    };
    out.push(chunk(ctx, choice, Some(usage(c))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent::ToolCall;

    fn completion(calls: Vec<ToolCall>, finish: Finish) -> Completion {
        Completion {
            text: String::new(),
            calls,
            finish,
            prompt_tokens: 10,
            completion_tokens: 3,
            partial_call: None,
            stop_sequence: None,
        }
    }

    #[test]
    fn a_call_cut_short_comes_back_as_far_as_it_got() {
        let ctx = ReplyContext {
            id: "chatcmpl-abc".into(),
            created: 1,
            model: "m".into(),
            chat: true,
        };
        let mut c = completion(vec![], Finish::Length);
        c.partial_call = Some(agent::calls::PartialCall {
            name: "get_weather".into(),
            arguments: "{\"city\": \"Pa".into(),
        });
        let w = whole(&ctx, &c);
        let choice = &w["choices"][0];
        assert_eq!(choice["finish_reason"], "length");
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "get_weather");
        assert_eq!(call["function"]["arguments"], "{\"city\": \"Pa");
        let end = closing(&ctx, &c);
        assert_eq!(
            end[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
            "get_weather"
        );
        assert_eq!(end[1]["choices"][0]["finish_reason"], "length");
    }

    #[test]
    fn a_call_is_a_json_string_of_arguments_with_an_id() {
        let ctx = ReplyContext {
            id: "chatcmpl-abc".into(),
            created: 1,
            model: "m".into(),
            chat: true,
        };
        let c = completion(vec![ToolCall::new("f", json!({"a": 1}))], Finish::ToolCalls);
        let w = whole(&ctx, &c);
        let choice = &w["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], Value::Null);
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["function"]["arguments"], "{\"a\":1}");
        assert_eq!(call["id"], "call_abc_0");
        assert_eq!(w["usage"]["total_tokens"], 13);
        let end = closing(&ctx, &c);
        assert_eq!(end.len(), 2);
        assert_eq!(end[0]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
        assert_eq!(end[1]["usage"]["prompt_tokens"], 10);
        assert_eq!(end[1]["object"], "chat.completion.chunk");
    }

    #[test]
    fn text_completions_have_their_own_shape() {
        let ctx = ReplyContext {
            id: "cmpl-x".into(),
            created: 1,
            model: "m".into(),
            chat: false,
        };
        let mut c = completion(vec![], Finish::Length);
        c.text = "more".into();
        let w = whole(&ctx, &c);
        assert_eq!(w["object"], "text_completion");
        assert_eq!(w["choices"][0]["text"], "more");
        assert_eq!(w["choices"][0]["finish_reason"], "length");
        assert!(opening(&ctx).is_none());
        assert_eq!(text_piece(&ctx, "a")["choices"][0]["text"], "a");
    }
}
