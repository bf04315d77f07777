//! How many tokens a request's prompt is, built as [`Completer::chat`] builds it: for clients
//! that size a request before sending it (Anthropic's `count_tokens`), and for a stream that
//! names its input tokens in its first event, before the engine has seen the prompt.
//!
//! The three shapes follow `chat`'s: the plain chat template when no tool is in sight; the
//! agent's transcript when tools are declared or calls and results are in the history; and,
//! when the client demands a call (`required` or a named tool), the transcript with the call's
//! opener, since `chat` puts the opener in the prompt. A change to how `chat` builds a prompt
//! must be made here too; the API's end-to-end test compares the two counts.

use agent::calls;

use super::request::{ChatRequest, ToolChoice};
use super::run::Completer;
use crate::agent_loop::{call_format, encode_pieces};
use crate::error::Result;

impl Completer {
    /// The number of prompt tokens `chat(request, …)` would prefill, or the error it would
    /// refuse the request with before generating. A prompt longer than the context is counted,
    /// not refused: saying how long it is is the point.
    pub fn prompt_tokens(&self, request: &ChatRequest) -> Result<usize> {
        request.check()?;
        let tokenizer = self.engine().tokenizer();
        if !request.uses_tools() {
            return Ok(tokenizer.encode_chat(&request.chat_messages(), true)?.len());
        }
        let format = call_format(tokenizer);
        let mut pieces = calls::render(format, &request.tools, &request.entries(), true);
        if request.calls_possible() && request.tool_choice != ToolChoice::Auto {
            pieces.extend(calls::opener_pieces(format));
        }
        Ok(encode_pieces(tokenizer, &pieces, true)?.len())
    }
}
