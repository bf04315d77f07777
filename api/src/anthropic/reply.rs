//! Anthropic's Message bodies: the whole reply, and the pieces a stream is made of (its
//! blocks and its end), so that a streamed reply accumulates into the same message. A call
//! cut short by `max_tokens` is not dropped: it is a last `tool_use` block with its input as
//! far as it got, and `stop_reason: "max_tokens"` says it is incomplete (as Anthropic's API
//! returns a cut `tool_use`).

use chat::completion::{Completion, Finish};
use serde_json::{Value, json};

use super::partial;

/// What every body of one reply shares.
#[derive(Debug, Clone)]
pub struct MessageContext {
    /// `msg_…`
    pub id: String,
    pub model: String,
    /// The request's `max_tokens`: a reply cut shorter than it ran out of context instead.
    pub max_tokens: usize,
}

/// Why the reply ended, in Anthropic's words: a client's stop sequence is `stop_sequence`
/// (and [`Completion::stop_sequence`] says which), the model ending its turn `end_turn`.
pub fn stop_reason(ctx: &MessageContext, c: &Completion) -> &'static str {
    match c.finish {
        Finish::Stop if c.stop_sequence.is_some() => "stop_sequence",
        Finish::ToolCalls => "tool_use",
        // the generation had room for max_tokens unless the context was smaller
        Finish::Length if c.completion_tokens < ctx.max_tokens => "model_context_window_exceeded",
        Finish::Length => "max_tokens",
        Finish::Stop | Finish::Cancelled => "end_turn",
    }
}

/// Usage as a whole reply writes it.
pub fn usage(c: &Completion) -> Value {
    json!({"input_tokens": c.prompt_tokens, "output_tokens": c.completion_tokens})
}

/// The `tool_use` block of the reply's `i`th call, `input` as given (the stream opens it
/// empty and sends the arguments as a delta).
pub fn tool_use(ctx: &MessageContext, i: usize, name: &str, input: Value) -> Value {
    json!({
        "type": "tool_use",
        "id": format!("toolu_{}_{i}", ctx.id.trim_start_matches("msg_")),
        "name": name,
        "input": input,
    })
}

/// The reply's calls in block order, each as (name, its arguments as JSON text, its input
/// as an object): the whole ones, then the one cut short.
pub fn calls(c: &Completion) -> Vec<(&str, String, Value)> {
    let whole = c.calls.iter().map(|call| {
        (
            call.name.as_str(),
            call.arguments.to_string(),
            call.arguments.clone(),
        )
    });
    let cut = c.partial_call.iter().map(|call| {
        let input = partial::object_so_far(&call.arguments);
        (call.name.as_str(), call.arguments.clone(), input)
    });
    whole.chain(cut).collect()
}

/// Whether the reply has a text block: when it has text, or nothing else to say.
pub fn has_text_block(c: &Completion) -> bool {
    !c.text.is_empty() || (c.calls.is_empty() && c.partial_call.is_none())
}

/// The message, `content` and the end left to the caller (empty and null in a stream's
/// `message_start`).
fn message(
    ctx: &MessageContext,
    content: Vec<Value>,
    stop: Option<(&str, Option<&str>)>,
    usage: Value,
) -> Value {
    let (stop_reason, stop_sequence) = stop.unzip();
    json!({
        "id": ctx.id,
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence.flatten(),
        "usage": usage,
    })
}

/// A whole reply: the text block (if any), then one `tool_use` block per call.
pub fn whole(ctx: &MessageContext, c: &Completion) -> Value {
    let mut content = Vec::new();
    if has_text_block(c) {
        content.push(json!({"type": "text", "text": c.text}));
    }
    for (i, (name, _, input)) in calls(c).into_iter().enumerate() {
        content.push(tool_use(ctx, i, name, input));
    }
    let stop = (stop_reason(ctx, c), c.stop_sequence.as_deref());
    message(ctx, content, Some(stop), usage(c))
}

/// A stream's first message: nothing generated yet, the prompt's size known.
pub fn started(ctx: &MessageContext, input_tokens: usize) -> Value {
    message(
        ctx,
        Vec::new(),
        None,
        json!({"input_tokens": input_tokens, "output_tokens": 0}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent::ToolCall;

    fn ctx() -> MessageContext {
        MessageContext {
            id: "msg_abc".into(),
            model: "m".into(),
            max_tokens: 10,
        }
    }

    fn completion(text: &str, calls: Vec<ToolCall>, finish: Finish, tokens: usize) -> Completion {
        Completion {
            text: text.into(),
            calls,
            finish,
            prompt_tokens: 7,
            completion_tokens: tokens,
            partial_call: None,
            stop_sequence: None,
        }
    }

    #[test]
    fn a_text_reply_is_one_text_block() {
        let w = whole(&ctx(), &completion("Hi.", vec![], Finish::Stop, 2));
        assert_eq!(w["type"], "message");
        assert_eq!(w["role"], "assistant");
        assert_eq!(w["id"], "msg_abc");
        assert_eq!(w["content"], json!([{"type": "text", "text": "Hi."}]));
        assert_eq!(w["stop_reason"], "end_turn");
        assert_eq!(w["stop_sequence"], Value::Null);
        assert_eq!(w["usage"], json!({"input_tokens": 7, "output_tokens": 2}));
        // an empty reply still has its (empty) text block
        let empty = whole(&ctx(), &completion("", vec![], Finish::Stop, 1));
        assert_eq!(empty["content"], json!([{"type": "text", "text": ""}]));
    }

    #[test]
    fn a_call_is_a_tool_use_block_with_its_input_as_an_object() {
        let c = completion(
            "",
            vec![ToolCall::new("get_weather", json!({"city": "Oslo"}))],
            Finish::ToolCalls,
            9,
        );
        let w = whole(&ctx(), &c);
        assert_eq!(w["stop_reason"], "tool_use");
        assert_eq!(
            w["content"],
            json!([{"type": "tool_use", "id": "toolu_abc_0", "name": "get_weather",
                    "input": {"city": "Oslo"}}])
        );
        let with_text = completion("Let me see.", c.calls.clone(), Finish::ToolCalls, 9);
        let w = whole(&ctx(), &with_text);
        assert_eq!(w["content"][0]["text"], "Let me see.");
        assert_eq!(w["content"][1]["type"], "tool_use");
    }

    #[test]
    fn a_call_cut_short_is_a_last_tool_use_block_as_far_as_it_got() {
        let mut c = completion("", vec![], Finish::Length, 10);
        c.partial_call = Some(agent::calls::PartialCall {
            name: "get_weather".into(),
            arguments: "{\"city\": \"Pa".into(),
        });
        let w = whole(&ctx(), &c);
        assert_eq!(w["stop_reason"], "max_tokens");
        assert_eq!(
            w["content"],
            json!([{"type": "tool_use", "id": "toolu_abc_0", "name": "get_weather",
                    "input": {"city": "Pa"}}])
        );
        assert_eq!(calls(&c)[0].1, "{\"city\": \"Pa");
    }

    #[test]
    fn a_stop_sequence_is_named() {
        let mut c = completion("a", vec![], Finish::Stop, 3);
        c.stop_sequence = Some("\n\n".into());
        let w = whole(&ctx(), &c);
        assert_eq!(w["stop_reason"], "stop_sequence");
        assert_eq!(w["stop_sequence"], "\n\n");
    }

    #[test]
    fn a_cut_reply_says_whether_max_tokens_or_the_context_cut_it() {
        let at_max = completion("a", vec![], Finish::Length, 10);
        assert_eq!(stop_reason(&ctx(), &at_max), "max_tokens");
        let short = completion("a", vec![], Finish::Length, 4);
        assert_eq!(stop_reason(&ctx(), &short), "model_context_window_exceeded");
        let cancelled = completion("a", vec![], Finish::Cancelled, 4);
        assert_eq!(stop_reason(&ctx(), &cancelled), "end_turn");
    }

    #[test]
    fn a_stream_starts_with_an_empty_message() {
        let s = started(&ctx(), 12);
        assert_eq!(s["content"], json!([]));
        assert_eq!(s["stop_reason"], Value::Null);
        assert_eq!(s["usage"]["input_tokens"], 12);
        assert_eq!(s["usage"]["output_tokens"], 0);
    }
}
