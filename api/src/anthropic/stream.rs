//! A streamed Message in Anthropic's exact event sequence, each event named (`event:`) as the
//! `anthropic` client dispatches on the name: `message_start`, `ping`, then per block
//! `content_block_start` / `content_block_delta` / `content_block_stop`, then
//! `message_delta` (the stop reason and output tokens) and `message_stop`. A failure mid-stream
//! is an `error` event with Anthropic's error body, and nothing after it.
//!
//! The text block opens with the first piece of text, so that a reply that is only a call
//! has only its `tool_use` block, as Anthropic's own forced calls do. A call is decoded whole
//! under its grammar (not streamed), so its arguments arrive as one `input_json_delta`.

use axum::response::sse::Event;
use chat::completion::Completion;
use serde_json::{Value, json};

use super::error;
use super::reply::{self, MessageContext};
use crate::error::ApiError;
use crate::sse::StreamWriter;

/// An event named as its body's `type`, which is how Anthropic names every one of them.
fn event(body: Value) -> Event {
    let name = body.get("type").and_then(Value::as_str).unwrap_or("error");
    Event::default().event(name).data(body.to_string())
}

pub(crate) struct AnthropicStream {
    ctx: MessageContext,
    input_tokens: usize,
    /// The index of the block open now or, when none is, of the next one.
    index: usize,
    text_open: bool,
}

impl AnthropicStream {
    pub(crate) fn new(ctx: MessageContext, input_tokens: usize) -> Self {
        AnthropicStream {
            ctx,
            input_tokens,
            index: 0,
            text_open: false,
        }
    }

    fn block_start(&self, block: Value) -> Value {
        json!({"type": "content_block_start", "index": self.index, "content_block": block})
    }

    fn block_delta(&self, delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": self.index, "delta": delta})
    }

    /// Ends the open block; the next one takes the next index.
    fn block_stop(&mut self) -> Value {
        let stop = json!({"type": "content_block_stop", "index": self.index});
        self.index += 1;
        stop
    }

    fn open_text(&mut self, out: &mut Vec<Value>) {
        if !self.text_open {
            out.push(self.block_start(json!({"type": "text", "text": ""})));
            self.text_open = true;
        }
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if self.text_open {
            out.push(self.block_stop());
            self.text_open = false;
        }
    }

    /// The stream's first events.
    fn started(&self) -> Vec<Value> {
        vec![
            json!({"type": "message_start", "message": reply::started(&self.ctx, self.input_tokens)}),
            json!({"type": "ping"}),
        ]
    }

    fn piece(&mut self, piece: &str) -> Vec<Value> {
        let mut out = Vec::new();
        if piece.is_empty() {
            return out;
        }
        self.open_text(&mut out);
        out.push(self.block_delta(json!({"type": "text_delta", "text": piece})));
        out
    }

    fn ended(&mut self, result: Result<Completion, ApiError>) -> Vec<Value> {
        let c = match result {
            Ok(c) => c,
            Err(e) => return vec![error::body(&e)],
        };
        let mut out = Vec::new();
        // the same blocks as the whole reply: an empty text block when there is nothing else
        if reply::has_text_block(&c) {
            self.open_text(&mut out);
        }
        self.close_text(&mut out);
        for (i, (name, arguments, _)) in reply::calls(&c).into_iter().enumerate() {
            let empty = Value::Object(Default::default());
            out.push(self.block_start(reply::tool_use(&self.ctx, i, name, empty)));
            // a cut call's text as it is: the client reads partial JSON as it streams
            if !arguments.is_empty() {
                out.push(
                    self.block_delta(
                        json!({"type": "input_json_delta", "partial_json": arguments}),
                    ),
                );
            }
            out.push(self.block_stop());
        }
        out.push(json!({
            "type": "message_delta",
            "delta": {"stop_reason": reply::stop_reason(&self.ctx, &c), "stop_sequence": c.stop_sequence},
            "usage": {"output_tokens": c.completion_tokens},
        }));
        out.push(json!({"type": "message_stop"}));
        out
    }
}

impl StreamWriter for AnthropicStream {
    fn opening(&mut self) -> Vec<Event> {
        self.started().into_iter().map(event).collect()
    }

    fn text(&mut self, piece: &str) -> Vec<Event> {
        self.piece(piece).into_iter().map(event).collect()
    }

    fn done(&mut self, result: Result<Completion, ApiError>) -> Vec<Event> {
        self.ended(result).into_iter().map(event).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent::ToolCall;
    use chat::completion::Finish;

    fn writer() -> AnthropicStream {
        AnthropicStream::new(
            MessageContext {
                id: "msg_x".into(),
                model: "m".into(),
                max_tokens: 16,
            },
            5,
        )
    }

    fn names(events: &[Value]) -> Vec<&str> {
        events
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?"))
            .collect()
    }

    fn completion(text: &str, calls: Vec<ToolCall>, finish: Finish) -> Completion {
        Completion {
            text: text.into(),
            calls,
            finish,
            prompt_tokens: 5,
            completion_tokens: 3,
            partial_call: None,
            stop_sequence: None,
        }
    }

    #[test]
    fn text_streams_in_anthropics_order() {
        let mut w = writer();
        let mut events = w.started();
        events.extend(w.piece("Hel"));
        events.extend(w.piece(""));
        events.extend(w.piece("lo"));
        events.extend(w.ended(Ok(completion("Hello", vec![], Finish::Stop))));
        assert_eq!(
            names(&events),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let start = &events[0]["message"];
        assert_eq!(start["content"], json!([]));
        assert_eq!(start["usage"]["input_tokens"], 5);
        assert_eq!(events[2]["index"], 0);
        assert_eq!(
            events[2]["content_block"],
            json!({"type": "text", "text": ""})
        );
        assert_eq!(
            events[3]["delta"],
            json!({"type": "text_delta", "text": "Hel"})
        );
        assert_eq!(events[5]["index"], 0);
        assert_eq!(events[6]["delta"]["stop_reason"], "end_turn");
        assert_eq!(events[6]["usage"]["output_tokens"], 3);
    }

    #[test]
    fn a_call_is_a_tool_use_block_after_the_text() {
        let call = ToolCall::new("get_weather", json!({"city": "Oslo"}));
        let mut w = writer();
        let mut events = w.started();
        events.extend(w.piece("Let me look."));
        events.extend(w.ended(Ok(completion(
            "Let me look.",
            vec![call.clone()],
            Finish::ToolCalls,
        ))));
        assert_eq!(
            names(&events)[2..],
            [
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let block = &events[5];
        assert_eq!(block["index"], 1);
        assert_eq!(block["content_block"]["type"], "tool_use");
        assert_eq!(block["content_block"]["id"], "toolu_x_0");
        assert_eq!(block["content_block"]["input"], json!({}));
        let delta = &events[6]["delta"];
        assert_eq!(delta["type"], "input_json_delta");
        let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
        assert_eq!(input, call.arguments);
        assert_eq!(events[7]["index"], 1);
        assert_eq!(events[8]["delta"]["stop_reason"], "tool_use");

        // a forced call: no text block at all, the call at index 0
        let mut w = writer();
        let mut events = w.started();
        events.extend(w.ended(Ok(completion("", vec![call], Finish::ToolCalls))));
        assert_eq!(events[2]["content_block"]["type"], "tool_use");
        assert_eq!(events[2]["index"], 0);

        // a call cut short: its text so far, then max_tokens
        let mut cut = completion("", vec![], Finish::Length);
        cut.completion_tokens = 16;
        cut.partial_call = Some(agent::calls::PartialCall {
            name: "get_weather".into(),
            arguments: "{\"city\": \"Pa".into(),
        });
        let events = writer().ended(Ok(cut));
        assert_eq!(events[0]["content_block"]["name"], "get_weather");
        assert_eq!(events[1]["delta"]["partial_json"], "{\"city\": \"Pa");
        assert_eq!(events[3]["delta"]["stop_reason"], "max_tokens");
    }

    #[test]
    fn nothing_said_is_still_one_empty_text_block() {
        let mut w = writer();
        let events = w.ended(Ok(completion("", vec![], Finish::Length)));
        assert_eq!(
            names(&events),
            [
                "content_block_start",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }

    #[test]
    fn an_error_mid_stream_is_an_error_event_and_the_end() {
        let mut w = writer();
        let mut events = w.piece("partial");
        events.extend(w.ended(Err(ApiError::server("the engine stopped"))));
        let data = events.last().unwrap();
        assert_eq!(data["type"], "error");
        assert_eq!(data["error"]["type"], "api_error");
        assert_eq!(data["error"]["message"], "the engine stopped");
    }
}
