//! One completion for a program other than the app — the local API's chat and text
//! completions — independent of any wire format: the request as data (messages, sampling,
//! tools, output format), run on a scratch session of its own so it never touches the open
//! conversation's cache or draft, and the outcome (text, calls, why it ended, token counts).
//!
//! - Tools go through the agent's call formats and grammar ([`crate::agent_loop`]): the
//!   model writes freely until it opens a call, then the call is decoded under the grammar of
//!   the declared tools (lazy, as in llama.cpp's server); `required` or a named function puts
//!   the opener in the prompt so that a call follows at once. Calls are returned, not run: the
//!   client runs its own tools.
//! - A JSON output format is a grammar too (llguidance's JSON Schema support), so the text
//!   always parses and fits the schema when the generation was not cut short.
//! - Every text — messages, tool results, a raw prompt — is tokenized as data: no client can
//!   write a control token.

mod count;
mod request;
mod run;
mod save;

pub use request::{ChatRequest, OutputFormat, RequestMessage, ToolChoice, check_tool_name};
pub use run::{Completer, Completion, Finish};
pub use save::save_exchange;
