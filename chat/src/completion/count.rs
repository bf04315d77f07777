//! A request's prompt, built once for [`Completer::chat`] and for counting it: for clients
//! that size a request before sending it (Anthropic's `count_tokens`), and for a stream that
//! names its input tokens in its first event, before the engine has seen the prompt.
//!
//! Three shapes: the plain chat template when no tool is in sight; the agent's transcript
//! when tools are declared or calls and results are in the history; and, when the client
//! demands a call (`required` or a named tool), the transcript with the call's opener, so
//! that the call starts with the first token.

use agent::calls;

use super::request::{ChatRequest, ToolChoice};
use super::run::Completer;
use crate::agent_loop::{call_format, encode_pieces};
use crate::error::Result;

impl Completer {
    /// The prompt `chat(request, …)` prefills (the request is checked by the caller).
    pub(super) fn prompt(&self, request: &ChatRequest) -> Result<Vec<u32>> {
        let tokenizer = self.engine().tokenizer();
        if !request.uses_tools() {
            return Ok(tokenizer.encode_chat(&request.chat_messages(), true)?);
        }
        let format = call_format(tokenizer);
        let mut pieces = calls::render(format, &request.tools, &request.entries(), true);
        if request.calls_possible() && request.tool_choice != ToolChoice::Auto {
            pieces.extend(calls::opener_pieces(format));
        }
        encode_pieces(tokenizer, &pieces, true)
    }

    /// The number of prompt tokens `chat(request, …)` would prefill, or the error it would
    /// refuse the request with before generating. A prompt longer than the context is counted,
    /// not refused: saying how long it is is the point.
    pub fn prompt_tokens(&self, request: &ChatRequest) -> Result<usize> {
        request.check()?;
        if request.has_pictures() {
            return self.picture_prompt_tokens(request);
        }
        Ok(self.prompt(request)?.len())
    }

    /// The positions a request with pictures takes: its tokens and each picture's rows
    /// (pictures never come with tools, `ChatRequest::check`).
    pub(super) fn picture_prompt_tokens(&self, request: &ChatRequest) -> Result<usize> {
        if self.engine().info().projector.is_none() {
            return Err(crate::Error::NoProjector {
                model: self
                    .engine()
                    .info()
                    .name
                    .unwrap_or_else(|| "this model".into()),
            });
        }
        Ok(self
            .engine()
            .prompt_tokens(&engine::Prompt::Chat(request.chat_messages()))?)
    }
}
