//! What the agent loop asks of the model: one generation from token ids, free or under a
//! token constraint, streaming its text. [`EngineModel`] is the engine on one of its
//! sessions; [`ScriptedCalls`] is a test double that decides *which* calls are made (the
//! choice a small base model cannot make well) while everything else — the grammar, the
//! tools, the results in the context, the final answer — runs for real.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use agent::ToolCall;
use agent::calls::CallFormat;
use engine::{
    EngineHandle, GemmaTokenizer, GenerateOptions, GenerateParams, Generation, GenerationStats,
    Prompt, SessionId, StopReason, TokenConstraint,
};

use crate::error::Result;

/// What a generation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The model's own text, until its answer ends or it opens a call.
    Free,
    /// A call's body, after the opener, under the call grammar.
    Call,
    /// The answer once no more calls may be made (the step limit), calls masked out.
    Answer,
}

/// One generation, as the agent loop needs it.
pub trait AgentModel {
    fn tokenizer(&self) -> &GemmaTokenizer;
    /// The context, in tokens.
    fn context(&self) -> usize;
    /// Generate a continuation of `prompt` (token ids, `<bos>` first).
    fn generate(
        &mut self,
        phase: Phase,
        prompt: Vec<u32>,
        params: GenerateParams,
        constraint: Option<Box<dyn TokenConstraint>>,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation>;
}

/// The engine, on `session`.
pub struct EngineModel {
    pub engine: EngineHandle,
    pub session: SessionId,
}

impl AgentModel for EngineModel {
    fn tokenizer(&self) -> &GemmaTokenizer {
        self.engine.tokenizer()
    }

    fn context(&self) -> usize {
        self.engine.info().context
    }

    fn generate(
        &mut self,
        _phase: Phase,
        prompt: Vec<u32>,
        params: GenerateParams,
        constraint: Option<Box<dyn TokenConstraint>>,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation> {
        let handle = self.engine.generate_with(
            self.session,
            Prompt::Ids(prompt),
            params,
            GenerateOptions {
                constraint,
                cancel: Some(cancel.clone()),
            },
        )?;
        Ok(handle.wait(on_text)?)
    }
}

/// A test double for the model's *choice* of calls: while `script` has calls, a free
/// generation "decodes" the call opener, and the constrained one after it "decodes" the
/// next scripted call — checked by the real grammar, token by token, so a script cannot
/// hold a call the mask would have refused. Once the script is spent, the real model writes.
pub struct ScriptedCalls<M> {
    pub inner: M,
    pub format: CallFormat,
    /// The enabled tools (the script's arguments are written in their schemas' order).
    pub tools: Vec<agent::Tool>,
    pub script: VecDeque<ToolCall>,
    /// Set between the opener and the call's body.
    pending: Option<ToolCall>,
}

impl<M: AgentModel> ScriptedCalls<M> {
    pub fn new(
        inner: M,
        format: CallFormat,
        tools: Vec<agent::Tool>,
        script: impl IntoIterator<Item = ToolCall>,
    ) -> Self {
        ScriptedCalls {
            inner,
            format,
            tools,
            script: script.into_iter().collect(),
            pending: None,
        }
    }
}

fn scripted(ids: Vec<u32>, text: String, stop_reason: StopReason) -> Generation {
    Generation {
        stats: GenerationStats {
            generated_tokens: ids.len(),
            ..Default::default()
        },
        ids,
        text,
        stop_reason,
        stop_string: None,
    }
}

impl<M: AgentModel> AgentModel for ScriptedCalls<M> {
    fn tokenizer(&self) -> &GemmaTokenizer {
        self.inner.tokenizer()
    }

    fn context(&self) -> usize {
        self.inner.context()
    }

    fn generate(
        &mut self,
        phase: Phase,
        prompt: Vec<u32>,
        params: GenerateParams,
        constraint: Option<Box<dyn TokenConstraint>>,
        cancel: &Arc<AtomicBool>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation> {
        let tokenizer = self.inner.tokenizer().clone();
        match (phase, self.pending.take(), constraint) {
            (Phase::Call, Some(call), Some(mut constraint)) => {
                // the call's body, fed through the real constraint: a scripted call the
                // grammar refuses fails here as a model's would be masked
                let ids = super::turn::encode_pieces(
                    &tokenizer,
                    &agent::calls::call_pieces(self.format, &self.tools, &call),
                    false,
                )?;
                let mut out = Vec::new();
                let mut stop = StopReason::MaxTokens;
                for id in ids {
                    let allowed = constraint
                        .allowed()
                        .map_err(|e| engine::Error::Constraint(e.0))?;
                    let ok = allowed
                        .get(id as usize / 32)
                        .is_some_and(|w| w & (1 << (id % 32)) != 0);
                    if !ok {
                        return Err(engine::Error::Constraint(format!(
                            "the scripted call {} breaks the grammar at token {id}",
                            call.name
                        ))
                        .into());
                    }
                    out.push(id);
                    if constraint
                        .accept(id)
                        .map_err(|e| engine::Error::Constraint(e.0))?
                    {
                        stop = StopReason::ConstraintDone;
                        break;
                    }
                }
                let text = tokenizer.decode(&out)?;
                Ok(scripted(out, text, stop))
            }
            (Phase::Free, None, _) if !self.script.is_empty() => {
                let call = self.script.pop_front().expect("not empty");
                self.pending = Some(call);
                let opener = super::turn::encode_pieces(
                    &tokenizer,
                    &agent::calls::opener_pieces(self.format),
                    false,
                )?;
                // as the engine reports reaching the opener: a stop string in text, a
                // stopping token for Gemma 4's `<|tool_call>`
                let stop = match self.format {
                    CallFormat::FencedJson => StopReason::StopString,
                    CallFormat::Gemma4 => StopReason::ConstraintDone,
                };
                Ok(scripted(opener, String::new(), stop))
            }
            (_, _, constraint) => self
                .inner
                .generate(phase, prompt, params, constraint, cancel, on_text),
        }
    }
}
