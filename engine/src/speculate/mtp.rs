//! Drafts by Gemma 4's multi-token-prediction assistant ([`crate::model::assistant`]): after
//! each token the model chose, the assistant's greedy chain from the hidden state the token
//! was chosen from, each step at the position the token will take, over the model's own KV
//! cache (llama.cpp b11434 `common/speculative.cpp`, `common_speculative_impl_draft_mtp`:
//! without sampling the drafter takes its top candidate). A refused draft costs its steps and
//! the check's extra rows; `control` rests the drafting where that does not pay.

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::{Hidden, log_softmax};
use crate::session::Session;

/// One step of a scored chain: the assistant's five most likely tokens with their natural-log
/// probabilities (over the whole vocabulary), and the token the chain went on with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DraftScore {
    pub top: Vec<(u32, f32)>,
    pub fed: u32,
}

/// The chain scored after one position of a sequence.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScoredChain {
    /// The position the chain drafts from: `ids[pos]` is its first input.
    pub pos: usize,
    pub steps: Vec<DraftScore>,
}

/// The most likely token (the lowest id among equals).
fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

impl Engine {
    /// The assistant's greedy chain of `length` drafts after `last` (the token just chosen,
    /// not yet in the cache) from `hidden` (the hidden state it was chosen from).
    pub(crate) fn draft_mtp(
        &self,
        session: &mut Session,
        last: u32,
        hidden: &Hidden,
        length: usize,
    ) -> Result<Vec<u32>> {
        let assistant = self.assistant().ok_or_else(no_assistant)?;
        let mut draft = Vec::with_capacity(length);
        let (mut token, mut h) = (last, hidden.clone());
        for _ in 0..length {
            let step = assistant.step(&self.model, session.cache_mut(), token, &h)?;
            token = argmax(&step.logits);
            draft.push(token);
            h = step.hidden;
        }
        Ok(draft)
    }

    /// The assistant's chains over `ids`, teacher-forced as llama.cpp's drafts are recorded
    /// (`tests/fixtures/gemma4-assistant`): the model reads `ids[..from]` in one pass, then
    /// one token per step; before each position `pos` from `from` on, a chain of `steps`
    /// drafts after `ids[pos]` from the hidden state of `pos - 1`, each next step fed
    /// `feed(pos, step)` or else the chain's own most likely token.
    pub fn score_assistant(
        &self,
        ids: &[u32],
        from: usize,
        steps: usize,
        feed: &dyn Fn(usize, usize) -> Option<u32>,
    ) -> Result<Vec<ScoredChain>> {
        let assistant = self.assistant().ok_or_else(no_assistant)?;
        if from == 0 || from >= ids.len() || ids.len() > self.context() {
            return Err(Error::InvalidArgument(
                "assistant scoring needs a prompt and a token after it, within the context".into(),
            ));
        }
        let mut session = self.new_session()?;
        let mut hidden = session.prefill(&self.model, &ids[..from])?;
        let mut out = Vec::new();
        for (pos, &id) in ids.iter().enumerate().skip(from) {
            let (mut token, mut h) = (id, hidden.clone());
            let mut chain = Vec::with_capacity(steps);
            for s in 0..steps {
                let step = assistant.step(&self.model, session.cache_mut(), token, &h)?;
                let row = log_softmax(&step.logits);
                let fed = feed(pos, s).unwrap_or_else(|| argmax(&step.logits));
                chain.push(DraftScore {
                    top: crate::engine::top_k(&row, 5),
                    fed,
                });
                token = fed;
                h = step.hidden;
            }
            out.push(ScoredChain { pos, steps: chain });
            hidden = session.step(&self.model, id)?;
        }
        Ok(out)
    }
}

fn no_assistant() -> Error {
    Error::InvalidArgument(
        "no multi-token-prediction assistant is loaded (give one with --assistant)".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[0.5, 2.0, 2.0, -1.0]), 1);
        assert_eq!(argmax(&[3.0]), 0);
    }

    /// A draft depends on the positions kept, never on the keys a refused check left behind
    /// in the cache at and after the drafted token's position (the assistant's query sees
    /// only the positions before it).
    #[test]
    fn a_refused_check_s_keys_do_not_reach_the_drafts() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let engine = Engine::load(EngineConfig {
            model_path: dir.join("gemma-family/gemma4-dense.q8_0.gguf"),
            assistant_path: Some(dir.join("gemma4-assistant/gemma4-dense.assistant.q8_0.gguf")),
            context: 128,
            prefill_chunk: 16,
            warm_up: false,
            ..EngineConfig::default()
        })
        .unwrap();
        let prompt: Vec<u32> = (0..40).map(|i| 300 + i * 5).collect();
        let draft_after = |dirty: bool| {
            let mut session = engine.new_session().unwrap();
            let hidden = session.prefill(&engine.model, &prompt).unwrap();
            if dirty {
                // a check of three tokens at positions 40..43, then rolled back
                session.check(&engine.model, &[310, 320, 330]).unwrap();
                session.truncate(&engine.model, prompt.len()).unwrap();
            }
            let a = engine.assistant().unwrap();
            a.step(&engine.model, session.cache_mut(), 350, &hidden)
                .unwrap()
                .logits
        };
        assert_eq!(draft_after(true), draft_after(false));
    }
}
