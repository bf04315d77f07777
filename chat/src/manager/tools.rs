//! A turn with the agent's tools on: the same conversation, the same commit of the user's
//! message, the same summaries and the same checkpointed reply as [`ConversationManager::send`],
//! but the reply is the agent loop's — the model may call tools (under the call grammar), their
//! results go back into its context, and it answers. The calls it made are kept with the reply
//! (its `timings` record, under `toolCalls`), so a reopened conversation still shows them; the
//! audit log has the rest.
//!
//! The loop runs on the conversation's engine session: its prompt (the tools' declarations in
//! the first turn, the calls and results) differs from a plain turn's, which the engine's
//! prefix reuse absorbs — the next plain turn prefills from where the two part.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent::Toolbox;
use agent::calls::Entry;
use engine::{ChatMessage, GenerateParams};
use memory::{Message, MessageStatus, ReplyRecorder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ConversationManager, TurnEvent};
use crate::agent_loop::{Agent, AgentEvent, AgentModel, AgentParams, AgentStop, CallGrammar};
use crate::error::Result;

/// What a turn with tools runs with.
pub struct Tools<'a> {
    /// The model's side: the engine on this manager's session ([`crate::agent_loop::EngineModel`]),
    /// or a test double around it.
    pub model: &'a mut dyn AgentModel,
    pub toolbox: &'a Toolbox<'a>,
    pub grammar: &'a CallGrammar,
    pub max_steps: usize,
}

/// One call of a turn, as the conversation keeps it with the reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolTurnCall {
    pub step: usize,
    pub tool: String,
    pub arguments: Value,
    pub ok: bool,
    pub error_code: Option<String>,
    pub preview: String,
    pub truncated: bool,
}

/// What a turn with tools produced.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolTurn {
    pub user: Message,
    pub reply: Message,
    pub stop: AgentStop,
    pub calls: Vec<ToolTurnCall>,
    pub summaries_made: usize,
}

/// The key of a reply's `timings` under which its calls are kept.
pub const TOOL_CALLS_KEY: &str = "toolCalls";

/// The calls kept with a reply, if it was a turn with tools.
pub fn calls_of(message: &Message) -> Option<Vec<ToolTurnCall>> {
    let calls = message.timings.as_ref()?.get(TOOL_CALLS_KEY)?;
    serde_json::from_value(calls.clone()).ok()
}

/// The conversation's prompt as the agent's transcript: the system text, then the turns;
/// `history` ends with the user's message being answered, which the loop adds itself.
fn entries(mut history: Vec<ChatMessage>) -> Vec<Entry> {
    history.pop();
    history
        .into_iter()
        .map(|m| match m.role {
            engine::tokenizer::Role::System => Entry::System(m.content),
            engine::tokenizer::Role::User => Entry::User(m.content),
            engine::tokenizer::Role::Assistant => Entry::Model {
                text: m.content,
                call: None,
            },
        })
        .collect()
}

impl ConversationManager {
    /// One turn with tools: commit `text`, summarize if needed, then run the agent loop on
    /// this conversation, streaming its text and its steps to `on_event` and checkpointing
    /// the reply's text as it comes. Setting `cancel` stops it (between steps or mid-token);
    /// what was said is kept as `stopped`.
    pub fn send_with_tools(
        &mut self,
        text: &str,
        params: &GenerateParams,
        tools: Tools<'_>,
        cancel: &Arc<AtomicBool>,
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<ToolTurn> {
        let (id, user, summaries_made, _) = self.begin_turn(text, &[], on_event)?;
        let history = entries(self.history()?);
        let mut reply =
            ReplyRecorder::begin(&self.store, &id)?.with_interval(self.config.checkpoint_interval);
        let mut calls: Vec<ToolTurnCall> = Vec::new();
        let mut save_error = None;
        let mut agent = Agent {
            model: tools.model,
            toolbox: tools.toolbox,
            grammar: tools.grammar,
            params: AgentParams {
                max_steps: tools.max_steps,
                sampling: params.sampling.clone(),
                answer_max_tokens: params.max_tokens,
                system_prompt: None,
                ..AgentParams::default()
            },
            conversation: Some(id.as_str().to_string()),
            cancel: cancel.clone(),
        };
        let store = &self.store;
        let outcome = agent.run(&history, text, &mut |event| {
            match &event {
                AgentEvent::Text(piece) => {
                    on_event(TurnEvent::Text(piece));
                    if let Err(e) = reply.push(store, piece) {
                        // e.g. a full disk: stop generating what cannot be saved
                        save_error.get_or_insert(e);
                        cancel.store(true, Ordering::Relaxed);
                    }
                    return;
                }
                AgentEvent::CallStarted {
                    step,
                    tool,
                    arguments,
                } => calls.push(ToolTurnCall {
                    step: *step,
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    ok: false,
                    error_code: None,
                    preview: String::new(),
                    truncated: false,
                }),
                AgentEvent::CallFinished {
                    step,
                    ok,
                    error_code,
                    preview,
                    truncated,
                    ..
                } => {
                    if let Some(c) = calls.iter_mut().find(|c| c.step == *step) {
                        c.ok = *ok;
                        c.error_code = error_code.clone();
                        c.preview = preview.clone();
                        c.truncated = *truncated;
                    }
                }
                AgentEvent::InvalidCall { step, problem } => calls.push(ToolTurnCall {
                    step: *step,
                    tool: String::new(),
                    arguments: Value::Null,
                    ok: false,
                    error_code: Some("invalid_call".into()),
                    preview: problem.clone(),
                    truncated: false,
                }),
                _ => {}
            }
            on_event(TurnEvent::Tool(&event));
        });
        let outcome = match (outcome, save_error) {
            (_, Some(e)) => Err(e.into()),
            (outcome, None) => outcome,
        };
        match outcome {
            Ok(outcome) => {
                let status = match outcome.stop {
                    AgentStop::Cancelled | AgentStop::ContextFull => MessageStatus::Stopped,
                    _ => MessageStatus::Complete,
                };
                let timings = serde_json::json!({
                    TOOL_CALLS_KEY: calls,
                    "stop": outcome.stop,
                    "constrainedTokens": outcome.constrained_tokens,
                });
                let tokens = self.count_tokens(reply.text())? as i64;
                let reply = reply.finish(&self.store, status, Some(tokens), Some(&timings))?;
                Ok(ToolTurn {
                    user,
                    reply,
                    stop: outcome.stop,
                    calls,
                    summaries_made,
                })
            }
            Err(e) => {
                let _ = reply.finish(&self.store, MessageStatus::Error, None, None);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transcript_holds_the_prompt_but_not_the_message_being_answered() {
        let history = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("hi"),
            ChatMessage::assistant("hello"),
            ChatMessage::user("which file?"),
        ];
        let e = entries(history);
        assert_eq!(e.len(), 3);
        assert!(matches!(&e[0], Entry::System(s) if s == "be brief"));
        assert!(matches!(&e[1], Entry::User(s) if s == "hi"));
        assert!(matches!(&e[2], Entry::Model { text, call: None } if text == "hello"));
    }
}
