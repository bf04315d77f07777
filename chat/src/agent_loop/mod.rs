//! The agent on the model: tool calls decoded under a grammar, run through the toolbox,
//! their results back into the context, until an answer.
//!
//! - [`grammar`]: llguidance on our vocabulary — the token masks of a call;
//! - [`turn`]: the transcript as token ids, text always as data;
//! - [`model`]: what the loop asks of the model (the engine, or a scripted test double);
//! - [`run`]: the loop itself, its parameters and its events.

pub mod grammar;
pub mod model;
pub mod run;
pub mod turn;

pub use grammar::{CallConstraint, CallGrammar, NoCalls, StopAtToken, token_env};
pub use model::{AgentModel, EngineModel, Phase, ScriptedCalls};
pub use run::{Agent, AgentEvent, AgentOutcome, AgentParams, AgentStop, StepRecord};
pub use turn::{
    answer_prompt, call_format, call_prompt, encode_pieces, opened_call, watch_for_call,
};
