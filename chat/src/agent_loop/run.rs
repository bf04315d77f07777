//! The agent loop: the model writes; when it opens a call, the call's body is decoded under
//! the call grammar, parsed and validated again, and run through the toolbox (writes asked
//! first); the result goes back into the context as data, and the model goes on — until it
//! answers, the step limit is reached, the context is full, or the user cancels (checked
//! between steps, and by the engine at every decode step).
//!
//! The shape is llama.cpp's server tool loop and Jan's agent: lazy grammar (free text until
//! the opener), one call per step, results capped to what the context can hold with a note
//! saying so. Events stream every step for the UI and the CLI; logs carry tools, outcomes
//! and counts, never arguments or text.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent::calls::{self, Entry};
use agent::{
    Approval, ApprovalAnswer, ApprovalRequest, CallContext, ConversationKey, ToolCall,
    ToolProgress, Toolbox, TurnBudget, error_output,
};
use engine::{GenerateParams, SamplingParams, StopReason};
use serde::Serialize;
use serde_json::Value;

use super::grammar::{CallGrammar, NoCalls};
use super::model::{AgentModel, Phase};
use super::turn::{
    answer_prompt, call_format, call_prompt, encode_pieces, opened_call, watch_for_call,
};
use crate::error::Result;

#[derive(Debug, Clone)]
pub struct AgentParams {
    /// Tool calls one task may make.
    pub max_steps: usize,
    pub sampling: SamplingParams,
    /// Tokens of the model's own text per step (its answer, or the text before a call).
    pub answer_max_tokens: usize,
    /// Tokens of one call's body.
    pub call_max_tokens: usize,
    /// Tokens one tool result may take in the context at most; fewer when the context is
    /// fuller.
    pub result_max_tokens: usize,
    /// Kept free for the answer when a result is fitted into the context.
    pub answer_reserve_tokens: usize,
    pub system_prompt: Option<String>,
}

impl Default for AgentParams {
    fn default() -> Self {
        AgentParams {
            max_steps: 8,
            sampling: SamplingParams::default(),
            answer_max_tokens: 512,
            call_max_tokens: 384,
            result_max_tokens: 1536,
            answer_reserve_tokens: 384,
            system_prompt: None,
        }
    }
}

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentStop {
    /// The model answered (its turn ended).
    Answered,
    /// The answer reached its token limit.
    MaxTokens,
    /// The model wanted another call after `max_steps`; it then answered with calls masked
    /// out.
    StepLimit,
    /// The model wanted another call, but the context had no room left for its result; it
    /// answered with calls masked out.
    NoRoomForResults,
    ContextFull,
    Cancelled,
}

/// What the UI and the CLI see, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "camelCase")]
pub enum AgentEvent {
    /// The model's own text as it streams.
    Text(String),
    #[serde(rename_all = "camelCase")]
    CallStarted {
        step: usize,
        tool: String,
        arguments: Value,
    },
    #[serde(rename_all = "camelCase")]
    WaitingForApproval {
        step: usize,
        tool: String,
        arguments: Value,
        action: String,
    },
    Progress(ToolProgress),
    #[serde(rename_all = "camelCase")]
    CallFinished {
        step: usize,
        tool: String,
        ok: bool,
        error_code: Option<String>,
        /// The result's first line or so.
        preview: String,
        /// The tool cut its result (a cap), or the loop cut it to fit the context.
        truncated: bool,
    },
    /// What the model decoded is not a usable call (only possible when the call was cut by
    /// its token limit: the grammar admits nothing else); it was answered with an error.
    #[serde(rename_all = "camelCase")]
    InvalidCall {
        step: usize,
        problem: String,
    },
    #[serde(rename_all = "camelCase")]
    Done {
        stop: AgentStop,
        steps: usize,
    },
}

/// One call the run made.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    pub call: Option<ToolCall>,
    pub ok: bool,
    pub error_code: Option<String>,
    /// The text the model got back.
    pub result: String,
}

#[derive(Debug, Clone)]
pub struct AgentOutcome {
    /// The model's final text.
    pub answer: String,
    pub stop: AgentStop,
    pub steps: Vec<StepRecord>,
    /// The whole transcript, the task and the answer included.
    pub entries: Vec<Entry>,
    /// Tokens decoded under the call grammar, and the seconds its masks took.
    pub constrained_tokens: usize,
    pub constraint_seconds: f64,
}

/// Everything a run uses besides the task.
pub struct Agent<'a> {
    pub model: &'a mut dyn AgentModel,
    pub toolbox: &'a Toolbox<'a>,
    pub grammar: &'a CallGrammar,
    pub params: AgentParams,
    pub conversation: ConversationKey,
    pub cancel: Arc<AtomicBool>,
}

/// Tells the UI a write waits for the user, then asks.
struct AnnouncedApproval<'a, 'e> {
    inner: &'a dyn Approval,
    events: &'a RefCell<&'e mut dyn FnMut(AgentEvent)>,
    step: usize,
}

impl Approval for AnnouncedApproval<'_, '_> {
    fn ask(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        (self.events.borrow_mut())(AgentEvent::WaitingForApproval {
            step: self.step,
            tool: request.tool.to_string(),
            arguments: request.arguments.clone(),
            action: request.action.clone(),
        });
        self.inner.ask(request)
    }
}

fn preview(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut p: String = line.chars().take(160).collect();
    if p.len() < line.len() || text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        p.push('…');
    }
    p
}

/// `text` cut to at most `room` tokens, with a note when cut (never silently).
fn fit_result(
    tokenizer: &engine::GemmaTokenizer,
    text: &str,
    room: usize,
) -> Result<(String, bool)> {
    let tokens = tokenizer.encode(text, false)?.len();
    if tokens <= room {
        return Ok((text.to_string(), false));
    }
    let total_chars = text.chars().count();
    let note_room = 40;
    let mut keep = total_chars * room.saturating_sub(note_room) / tokens.max(1);
    loop {
        let head: String = text.chars().take(keep).collect();
        let cut = format!(
            "{head}\n[cut to fit the context: the first {keep} of {total_chars} characters are shown]"
        );
        if tokenizer.encode(&cut, false)?.len() <= room || keep == 0 {
            return Ok((cut, true));
        }
        keep = keep * 3 / 4;
    }
}

/// A result given less room than this would say nothing: the call is not run, and the model
/// answers with what it has.
const MIN_RESULT_TOKENS: usize = 64;

impl Agent<'_> {
    /// The model's answer from `prompt` and the text it wrote before opening a call
    /// (`opened`), decoded with every way of opening a call masked out: the whole text of its
    /// turn, and why the run ends — `stop`, or `Cancelled` when the user stopped the answer.
    fn answer_without_calls(
        &mut self,
        format: calls::CallFormat,
        prompt: Vec<u32>,
        opened: &engine::Generation,
        emit: &dyn Fn(AgentEvent),
        stop: AgentStop,
    ) -> Result<(String, AgentStop)> {
        let tokenizer = self.model.tokenizer().clone();
        let prompt = answer_prompt(format, &tokenizer, prompt, opened)?;
        let room = self.model.context().saturating_sub(prompt.len() + 1);
        let answer = self.model.generate(
            Phase::Answer,
            prompt,
            GenerateParams {
                max_tokens: self.params.answer_max_tokens.min(room),
                sampling: self.params.sampling.clone(),
                stop_strings: Vec::new(),
                ignore_eos: false,
                speculation: Default::default(),
            },
            Some(Box::new(NoCalls::new(format, &tokenizer))),
            &self.cancel,
            &mut |t| emit(AgentEvent::Text(t.to_string())),
        )?;
        let stop = match answer.stop_reason {
            StopReason::Cancelled => AgentStop::Cancelled,
            _ => stop,
        };
        Ok((format!("{}{}", opened.text, answer.text), stop))
    }

    /// Run `task` after `history` (earlier turns of the conversation, if any).
    pub fn run(
        &mut self,
        history: &[Entry],
        task: &str,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<AgentOutcome> {
        let tokenizer = self.model.tokenizer().clone();
        let context = self.model.context();
        let format = call_format(&tokenizer);
        let tools = self.grammar.callable_tools(format, self.toolbox.tools());
        let lark = calls::call_grammar(format, &tools);
        let params = self.params.clone();

        let mut entries = Vec::new();
        if let Some(s) = params
            .system_prompt
            .as_ref()
            .filter(|s| !s.trim().is_empty())
        {
            entries.push(Entry::System(s.clone()));
        }
        entries.extend(history.iter().cloned());
        entries.push(Entry::User(task.to_string()));

        let events = RefCell::new(on_event);
        let emit = |e: AgentEvent| (events.borrow_mut())(e);
        let budget = TurnBudget::for_limits(&self.toolbox.limits);
        let mut steps: Vec<StepRecord> = Vec::new();
        let mut constrained_tokens = 0;
        let mut constraint_seconds = 0.0;
        let mut answer = String::new();

        let stop = loop {
            if self.cancel.load(Ordering::Relaxed) {
                break AgentStop::Cancelled;
            }
            let prompt = encode_pieces(
                &tokenizer,
                &calls::render(format, &tools, &entries, true),
                true,
            )?;
            let room = context.saturating_sub(prompt.len() + 1);
            if room < 16 {
                break AgentStop::ContextFull;
            }
            let mut free = GenerateParams {
                max_tokens: params.answer_max_tokens.min(room),
                sampling: params.sampling.clone(),
                stop_strings: Vec::new(),
                ignore_eos: false,
                speculation: Default::default(),
            };
            let watch = watch_for_call(format, &tokenizer, &mut free);
            let generation = self.model.generate(
                Phase::Free,
                prompt.clone(),
                free,
                watch,
                &self.cancel,
                &mut |t| emit(AgentEvent::Text(t.to_string())),
            )?;
            if !opened_call(format, &tokenizer, &generation) {
                answer = generation.text.trim().to_string();
                entries.push(Entry::Model {
                    text: generation.text.clone(),
                    call: None,
                });
                break match generation.stop_reason {
                    StopReason::Cancelled => AgentStop::Cancelled,
                    StopReason::ContextFull => AgentStop::ContextFull,
                    StopReason::MaxTokens => AgentStop::MaxTokens,
                    _ => AgentStop::Answered,
                };
            }
            let text_before = generation.text.clone();
            if steps.len() >= params.max_steps {
                // the model wants a call past the limit: it answers from what it has, with
                // every way of opening a call masked out, rather than end with nothing said
                let (text, stop) = self.answer_without_calls(
                    format,
                    prompt,
                    &generation,
                    &emit,
                    AgentStop::StepLimit,
                )?;
                answer = text.trim().to_string();
                entries.push(Entry::Model { text, call: None });
                break stop;
            }
            let step = steps.len() + 1;

            let call_prompt = call_prompt(format, &tokenizer, prompt.clone(), &generation)?;
            let room = context.saturating_sub(call_prompt.len() + 1);
            let constraint = self.grammar.constraint(&lark)?;
            let call_generation = self.model.generate(
                Phase::Call,
                call_prompt.clone(),
                GenerateParams {
                    max_tokens: params.call_max_tokens.min(room),
                    sampling: params.sampling.clone(),
                    stop_strings: Vec::new(),
                    ignore_eos: false,
                    speculation: Default::default(),
                },
                Some(Box::new(constraint)),
                &self.cancel,
                &mut |_| {},
            )?;
            constrained_tokens += call_generation.stats.constrained_tokens;
            constraint_seconds += call_generation.stats.constraint_seconds;
            // a call decoded while the user cancelled is not run
            if call_generation.stop_reason == StopReason::Cancelled
                || self.cancel.load(Ordering::Relaxed)
            {
                break AgentStop::Cancelled;
            }
            let body = tokenizer.decode(&call_generation.ids)?;
            let call = match calls::parse_call(format, &tools, &body) {
                Ok(call) => call,
                Err(problem) => {
                    tracing::info!(step, code = "invalid_call", "the model's call was refused");
                    emit(AgentEvent::InvalidCall {
                        step,
                        problem: problem.clone(),
                    });
                    let result = format!("The call could not be used: {problem}");
                    entries.push(Entry::Model {
                        text: text_before,
                        call: None,
                    });
                    entries.push(Entry::ToolResult {
                        tool: "the call".into(),
                        text: result.clone(),
                    });
                    steps.push(StepRecord {
                        call: None,
                        ok: false,
                        error_code: Some("invalid_call".into()),
                        result,
                    });
                    continue;
                }
            };
            // what the context can still take: the call itself, then the result, then room
            // for the answer; a call whose result could not be seen is not run
            let used = call_prompt.len() + call_generation.ids.len() + 32;
            let room = context
                .saturating_sub(used + params.answer_reserve_tokens)
                .min(params.result_max_tokens);
            if room < MIN_RESULT_TOKENS {
                tracing::info!(step, "context too full for another result; answering");
                let (text, stop) = self.answer_without_calls(
                    format,
                    prompt,
                    &generation,
                    &emit,
                    AgentStop::NoRoomForResults,
                )?;
                answer = text.trim().to_string();
                entries.push(Entry::Model { text, call: None });
                break stop;
            }
            emit(AgentEvent::CallStarted {
                step,
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            let announced = AnnouncedApproval {
                inner: self.toolbox.approval,
                events: &events,
                step,
            };
            let toolbox = Toolbox {
                sandbox: self.toolbox.sandbox,
                host: self.toolbox.host,
                summarizer: self.toolbox.summarizer,
                approval: &announced,
                remembered: self.toolbox.remembered,
                limits: self.toolbox.limits.clone(),
                external: self.toolbox.external,
            };
            let mut progress = |p: ToolProgress| emit(AgentEvent::Progress(p));
            let mut cx = CallContext {
                conversation: self.conversation.clone(),
                budget: &budget,
                progress: &mut progress,
                cancel: Some(self.cancel.as_ref()),
            };
            let (output, error_code) = match toolbox.call(&call, &mut cx) {
                Ok(out) => (out, None),
                Err(e) => (error_output(&call.name, &e), Some(e.code().to_string())),
            };
            let (result, cut) = fit_result(&tokenizer, &output.text_for_model, room)?;
            tracing::info!(
                step,
                tool = %call.name,
                ok = error_code.is_none(),
                cut,
                "agent step"
            );
            emit(AgentEvent::CallFinished {
                step,
                tool: call.name.clone(),
                ok: error_code.is_none(),
                error_code: error_code.clone(),
                preview: preview(&result),
                truncated: output.truncated || cut,
            });
            entries.push(Entry::Model {
                text: text_before,
                call: Some(call.clone()),
            });
            entries.push(Entry::ToolResult {
                tool: call.name.clone(),
                text: result.clone(),
            });
            steps.push(StepRecord {
                call: Some(call),
                ok: error_code.is_none(),
                error_code,
                result,
            });
        };
        emit(AgentEvent::Done {
            stop,
            steps: steps.len(),
        });
        Ok(AgentOutcome {
            answer,
            stop,
            steps,
            entries,
            constrained_tokens,
            constraint_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::preview;

    #[test]
    fn a_preview_is_one_short_line_marked_when_more_follows() {
        assert_eq!(preview("one line"), "one line");
        assert_eq!(preview("\nfirst\nsecond"), "first…");
        let long = "x".repeat(300);
        assert_eq!(preview(&long).chars().count(), 161);
    }
}
