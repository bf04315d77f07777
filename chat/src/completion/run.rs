//! Running a completion on a scratch session: plain, under a JSON grammar, or with tools
//! (free text until a call opens, then the call under the tools' grammar — the agent loop's
//! first step, [`crate::agent_loop::run`], without running the call).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use agent::ToolCall;
use agent::calls::{self, CallFormat, PartialCall};
use engine::{EngineHandle, GenerateParams, Generation, SessionId, StopReason, TokenConstraint};

use super::request::{ChatRequest, OutputFormat, ToolChoice, invalid};
use crate::agent_loop::{
    AgentModel, CallGrammar, EngineModel, Phase, call_format, call_prompt, opened_call,
    watch_for_call,
};
use crate::error::{Error, Result};

/// Why a completion ended, as OpenAI's `finish_reason` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its turn, reached a stop string, or its JSON is complete.
    Stop,
    /// `max_tokens` or the context ran out.
    Length,
    /// The model called a tool.
    ToolCalls,
    /// The client went away (or the caller cancelled).
    Cancelled,
}

impl Finish {
    fn of(reason: StopReason) -> Finish {
        match reason {
            StopReason::EndOfTurn | StopReason::StopString | StopReason::ConstraintDone => {
                Finish::Stop
            }
            StopReason::MaxTokens | StopReason::ContextFull => Finish::Length,
            StopReason::Cancelled => Finish::Cancelled,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Completion {
    /// The model's text (before the call, when it called a tool).
    pub text: String,
    /// At most one call: the call formats write one per step.
    pub calls: Vec<ToolCall>,
    /// A call cut short (`max_tokens`, the context, a cancel), as far as it was written; with
    /// [`Finish::Length`] or [`Finish::Cancelled`]. Never beside a whole call.
    pub partial_call: Option<PartialCall>,
    /// The client's stop string that ended the text, with [`Finish::Stop`].
    pub stop_sequence: Option<String>,
    pub finish: Finish,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

impl Completion {
    /// A reply of text alone, as `generation` ended it.
    fn text_of(generation: Generation, prompt_tokens: usize) -> Self {
        Completion {
            stop_sequence: generation.stop_string.clone(),
            finish: Finish::of(generation.stop_reason),
            completion_tokens: generation.stats.generated_tokens,
            text: generation.text,
            calls: Vec::new(),
            partial_call: None,
            prompt_tokens,
        }
    }
}

/// Runs completions on the engine, each on a session of its own.
pub struct Completer {
    engine: EngineHandle,
    /// Built on first use: a token trie of the whole vocabulary, not needed for plain text.
    grammar: Mutex<Option<Arc<CallGrammar>>>,
}

/// The Lark grammar of a JSON output format: written one way, numbers bounded, so that the
/// text always closes (see `agent::calls::json_rule`).
fn json_grammar(format: &OutputFormat) -> Option<String> {
    let schema = match format {
        OutputFormat::Text => return None,
        OutputFormat::JsonObject => calls::any_object_schema(),
        OutputFormat::JsonSchema(schema) => schema.clone(),
    };
    Some(format!("start: {}", calls::json_rule(&schema)))
}

impl Completer {
    pub fn new(engine: EngineHandle) -> Self {
        Completer {
            engine,
            grammar: Mutex::new(None),
        }
    }

    pub fn engine(&self) -> &EngineHandle {
        &self.engine
    }

    fn grammar(&self) -> Result<Arc<CallGrammar>> {
        let mut slot = self.grammar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = slot.as_ref() {
            return Ok(g.clone());
        }
        let g = Arc::new(CallGrammar::new(self.engine.tokenizer())?);
        *slot = Some(g.clone());
        Ok(g)
    }

    /// A text completion: `prompt` continued as it is (no chat template; `<bos>` first, the
    /// text tokenized as data).
    pub fn complete_text(
        &self,
        prompt: &str,
        params: GenerateParams,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion> {
        params
            .sampling
            .validate()
            .map_err(|e| invalid(e.to_string()))?;
        if params.max_tokens == 0 {
            return Err(invalid("`max_tokens` must be at least 1"));
        }
        let session = self.engine.open_session()?;
        let ids = self.engine.tokenizer().encode(prompt, true)?;
        self.plain(session.id(), ids, params, None, cancel, on_text)
    }

    /// A chat completion. Text streams to `on_text` as it is decoded; a call's body does not
    /// (it arrives whole, in [`Completion::calls`]).
    pub fn chat(
        &self,
        request: &ChatRequest,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion> {
        request.check()?;
        let tokenizer = self.engine.tokenizer().clone();
        let constraint = match json_grammar(&request.format) {
            Some(lark) => Some(Box::new(
                self.grammar()?
                    .constraint(&lark)
                    .map_err(|e| invalid(format!("the `response_format` schema: {e}")))?,
            ) as Box<dyn TokenConstraint>),
            None => None,
        };
        let session = self.engine.open_session()?;
        if request.has_pictures() {
            return self.with_pictures(session.id(), request, constraint, cancel, on_text);
        }
        let format = call_format(&tokenizer);
        let prompt = self.prompt(request)?;
        if !request.calls_possible() {
            return self.plain(
                session.id(),
                prompt,
                request.params.clone(),
                constraint,
                cancel,
                on_text,
            );
        }
        if request.tool_choice == ToolChoice::Auto {
            return self.free_then_call(session.id(), format, prompt, request, cancel, on_text);
        }
        // `required` or a named tool (`none` was answered above): the opener is in the
        // prompt, so the call starts with the first token
        let tools: Vec<agent::Tool> = match &request.tool_choice {
            ToolChoice::Function(name) => request
                .tools
                .iter()
                .filter(|t| t.name == *name)
                .cloned()
                .collect(),
            _ => request.tools.clone(),
        };
        let prompt_tokens = prompt.len();
        let budget = request.params.max_tokens;
        let (call, finish, completion_tokens) = self.call(
            session.id(),
            format,
            &tools,
            prompt,
            budget,
            request,
            cancel,
        )?;
        Ok(Completion {
            text: String::new(),
            finish,
            partial_call: call.partial(),
            stop_sequence: None,
            calls: call.whole(),
            prompt_tokens,
            completion_tokens,
        })
    }

    fn room(&self, prompt: &[u32], max_tokens: usize) -> Result<usize> {
        self.room_for(prompt.len(), max_tokens)
    }

    /// The most tokens a reply may have after a prompt of `prompt_tokens` positions.
    fn room_for(&self, prompt_tokens: usize, max_tokens: usize) -> Result<usize> {
        let context = self.engine.info().context;
        if prompt_tokens >= context {
            return Err(engine::Error::PromptTooLong {
                tokens: prompt_tokens,
                context,
            }
            .into());
        }
        Ok(max_tokens.min(context - prompt_tokens))
    }

    fn generate(
        &self,
        session: SessionId,
        prompt: Vec<u32>,
        params: GenerateParams,
        constraint: Option<Box<dyn TokenConstraint>>,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation> {
        let mut model = EngineModel {
            engine: self.engine.clone(),
            session,
        };
        model.generate(Phase::Free, prompt, params, constraint, cancel, on_text)
    }

    fn plain(
        &self,
        session: SessionId,
        prompt: Vec<u32>,
        mut params: GenerateParams,
        constraint: Option<Box<dyn TokenConstraint>>,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion> {
        params.max_tokens = self.room(&prompt, params.max_tokens)?;
        let prompt_tokens = prompt.len();
        let generation = self.generate(session, prompt, params, constraint, cancel, on_text)?;
        Ok(Completion::text_of(generation, prompt_tokens))
    }

    /// A plain completion whose messages hold pictures: the engine lays them into the chat
    /// prompt and encodes them with the projector loaded beside the model.
    fn with_pictures(
        &self,
        session: SessionId,
        request: &ChatRequest,
        constraint: Option<Box<dyn TokenConstraint>>,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion> {
        let prompt_tokens = self.picture_prompt_tokens(request)?;
        let mut params = request.params.clone();
        params.max_tokens = self.room_for(prompt_tokens, params.max_tokens)?;
        let handle = self.engine.generate_with(
            session,
            engine::Prompt::Chat(request.chat_messages()),
            params,
            engine::GenerateOptions {
                constraint,
                cancel: Some(cancel.clone()),
            },
        )?;
        let generation = handle.wait(on_text)?;
        Ok(Completion::text_of(generation, prompt_tokens))
    }

    /// Free text until the model opens a call (a stop string at the fence, or Gemma 4's
    /// opener token), then the call.
    fn free_then_call(
        &self,
        session: SessionId,
        format: CallFormat,
        prompt: Vec<u32>,
        request: &ChatRequest,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion> {
        let tokenizer = self.engine.tokenizer();
        let prompt_tokens = prompt.len();
        let mut free = request.params.clone();
        free.max_tokens = self.room(&prompt, free.max_tokens)?;
        let watch = watch_for_call(format, tokenizer, &mut free);
        let generation = self.generate(session, prompt.clone(), free, watch, cancel, on_text)?;
        // a client's own stop string ends the text too: only the opener opens a call
        let opened = opened_call(format, tokenizer, &generation);
        let mut completion_tokens = generation.stats.generated_tokens;
        if !opened {
            return Ok(Completion {
                text: generation.text,
                calls: Vec::new(),
                partial_call: None,
                stop_sequence: generation.stop_string.clone(),
                finish: Finish::of(generation.stop_reason),
                prompt_tokens,
                completion_tokens,
            });
        }
        let call_prompt = call_prompt(format, tokenizer, prompt, &generation)?;
        // one `max_tokens` for the text and the call together
        let budget = request.params.max_tokens.saturating_sub(completion_tokens);
        let (call, finish, call_tokens) = self.call(
            session,
            format,
            &request.tools,
            call_prompt,
            budget,
            request,
            cancel,
        )?;
        completion_tokens += call_tokens;
        Ok(Completion {
            text: generation.text,
            finish,
            partial_call: call.partial(),
            stop_sequence: None,
            calls: call.whole(),
            prompt_tokens,
            completion_tokens,
        })
    }

    /// A call's body under the grammar of `tools`, parsed and checked against its schema, or
    /// as far as it got when it was cut short (tokens, context, cancel), in at most `budget`
    /// tokens; with why it ended and the tokens it took.
    #[allow(clippy::too_many_arguments)] // one private step of `chat`, named at each call
    fn call(
        &self,
        session: SessionId,
        format: CallFormat,
        tools: &[agent::Tool],
        prompt: Vec<u32>,
        budget: usize,
        request: &ChatRequest,
        cancel: &Arc<AtomicBool>,
    ) -> Result<(CallOutcome, Finish, usize)> {
        let lark = calls::call_grammar(format, tools);
        let constraint = self.grammar()?.constraint(&lark)?;
        let max_tokens = self.room(&prompt, budget)?;
        if max_tokens == 0 {
            // the text before the opener used the whole budget
            let partial = calls::partial_call(format, tools, "");
            return Ok((CallOutcome::Cut(partial), Finish::Length, 0));
        }
        let generation = self.generate(
            session,
            prompt,
            GenerateParams {
                max_tokens,
                sampling: request.params.sampling.clone(),
                stop_strings: Vec::new(),
                ignore_eos: false,
                speculation: request.params.speculation,
            },
            Some(Box::new(constraint)),
            cancel,
            &mut |_| {},
        )?;
        let body = self.engine.tokenizer().decode(&generation.ids)?;
        let tokens = generation.stats.generated_tokens;
        if generation.stop_reason != StopReason::ConstraintDone {
            let partial = calls::partial_call(format, tools, &body);
            return Ok((
                CallOutcome::Cut(partial),
                Finish::of(generation.stop_reason),
                tokens,
            ));
        }
        let call = calls::parse_call(format, tools, &body).map_err(|problem| {
            // the grammar admits only valid calls: a refusal here is our bug, said plainly
            Error::Grammar(format!(
                "a call the grammar admitted was refused: {problem}"
            ))
        })?;
        Ok((CallOutcome::Whole(call), Finish::ToolCalls, tokens))
    }
}

/// How a call's decoding ended.
enum CallOutcome {
    Whole(ToolCall),
    /// Cut short; `None` when nothing of it identifies a tool yet.
    Cut(Option<PartialCall>),
}

impl CallOutcome {
    fn whole(&self) -> Vec<ToolCall> {
        match self {
            CallOutcome::Whole(call) => vec![call.clone()],
            CallOutcome::Cut(_) => Vec::new(),
        }
    }

    fn partial(&self) -> Option<PartialCall> {
        match self {
            CallOutcome::Whole(_) => None,
            CallOutcome::Cut(partial) => partial.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_formats_are_grammars_with_one_spelling() {
        assert_eq!(json_grammar(&OutputFormat::Text), None);
        let object = json_grammar(&OutputFormat::JsonObject).unwrap();
        assert!(object.starts_with("start: %json {"), "{object}");
        assert!(object.contains("\"type\":\"object\""), "{object}");
        assert!(object.contains("whitespace_flexible"), "{object}");
        // a client's own x-guidance is kept
        let own = json_grammar(&OutputFormat::JsonSchema(
            json!({"type": "array", "x-guidance": {"whitespace_flexible": true}}),
        ))
        .unwrap();
        assert!(own.contains("\"whitespace_flexible\":true"), "{own}");
    }
}
