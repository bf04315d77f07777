//! One generation: bring the session to the prompt (reusing the cached prefix), then sample
//! token by token, streaming whole-UTF-8 text pieces, until `<end_of_turn>`/`<eos>`, a stop
//! string, the token limit, a full context, or cancellation (checked every decode step).
//! A [`Pacer`] (see [`crate::thermal`]) may slow or pause the loop between decode steps.
//! A [`TokenConstraint`] may mask each step's logits (a tool call's grammar) and end the
//! generation when what it constrains is complete.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::sampling::{Sampler, SamplingParams, TokenConstraint, apply_mask};
use crate::session::{Session, common_prefix};
use crate::speculate::control::DraftControl;
use crate::speculate::{Drafter, Speculation, lookup::PromptLookup};
use crate::thermal::Pacer;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GenerateParams {
    pub max_tokens: usize,
    pub sampling: SamplingParams,
    /// Generation stops before any of these strings; the string itself is not emitted.
    pub stop_strings: Vec<String>,
    /// Keep going past `<eos>`/`<end_of_turn>` (benchmarks that need a fixed token count,
    /// like llama-bench's tg128).
    pub ignore_eos: bool,
    /// Draft tokens and check them in one pass (`crate::speculate`): the same output, faster
    /// where the reply repeats what the session holds.
    pub speculation: Speculation,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_tokens: 512,
            sampling: SamplingParams::default(),
            stop_strings: Vec::new(),
            ignore_eos: false,
            speculation: Speculation::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndOfTurn,
    MaxTokens,
    StopString,
    Cancelled,
    ContextFull,
    /// The token constraint said its text is complete.
    ConstraintDone,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    /// Prompt tokens already in the cache and not processed again.
    pub reused_tokens: usize,
    pub prefill_seconds: f64,
    pub time_to_first_token_seconds: f64,
    pub generated_tokens: usize,
    pub decode_seconds: f64,
    pub decode_tokens_per_second: f64,
    pub prefill_tokens_per_second: f64,
    /// Seconds the decode loop waited to hold a thermal rate cap.
    pub paced_seconds: f64,
    /// Seconds it was paused at `critical`.
    pub paused_seconds: f64,
    /// Tokens chosen under a token constraint, and the seconds its masks and updates took.
    #[serde(default)]
    pub constrained_tokens: usize,
    #[serde(default)]
    pub constraint_seconds: f64,
    /// Backend operations the prefill dispatched (kernel launches on the fused CUDA path:
    /// `backend::counting`), and the decode steps after it.
    #[serde(default)]
    pub prefill_ops: u64,
    #[serde(default)]
    pub decode_ops: u64,
    /// Speculation (`crate::speculate`): tokens drafted, those the model kept, and the
    /// batched checks that decided them.
    #[serde(default)]
    pub draft_tokens: usize,
    #[serde(default)]
    pub accepted_draft_tokens: usize,
    #[serde(default)]
    pub speculative_checks: usize,
    /// The speculation that ran: `auto` resolved, and `off` where the path does not speculate
    /// (a constraint, the candle backend, a fused GPU decode).
    #[serde(default)]
    pub speculation: Speculation,
    /// Time per backend operation in the prefill and in the decode steps after it
    /// (`backend::profile`), the most time first. Not serialized: `companion bench --profile`
    /// prints them; a generation's JSON stays as it was.
    #[serde(skip)]
    pub prefill_profile: Vec<crate::backend::OpTime>,
    #[serde(skip)]
    pub decode_profile: Vec<crate::backend::OpTime>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Generation {
    pub ids: Vec<u32>,
    pub text: String,
    pub stop_reason: StopReason,
    /// The stop string that ended it (with [`StopReason::StopString`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_string: Option<String>,
    pub stats: GenerationStats,
}

/// Holds back text that might be the start of a stop string.
struct StopFilter {
    stops: Vec<String>,
    pending: String,
}

impl StopFilter {
    fn new(stops: &[String]) -> Self {
        StopFilter {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
        }
    }

    /// Feed text; returns (text safe to emit, the stop string that was hit: the one that
    /// starts first, the longest of those that start there).
    fn feed(&mut self, text: &str) -> (String, Option<String>) {
        self.pending.push_str(text);
        if let Some((at, stop)) = self
            .stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()).map(|at| (at, s)))
            .min_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())))
        {
            let out = self.pending[..at].to_string();
            let stop = stop.clone();
            self.pending.clear();
            return (out, Some(stop));
        }
        // keep the longest suffix that is a proper prefix of some stop string
        let mut keep = 0;
        for s in &self.stops {
            for (i, _) in self.pending.char_indices() {
                let suffix = &self.pending[i..];
                if s.starts_with(suffix) {
                    keep = keep.max(suffix.len());
                    break;
                }
            }
        }
        let cut = self.pending.len() - keep;
        let out = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        (out, None)
    }

    fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

impl Engine {
    /// Generate a continuation of `prompt` (the full token sequence the session should hold,
    /// `<bos>` included). `on_text` receives each streamed piece.
    pub fn generate(
        &self,
        session: &mut Session,
        prompt: &[u32],
        params: &GenerateParams,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation> {
        self.generate_paced(session, prompt, params, cancel, None, None, on_text)
    }

    /// [`Self::generate`] with thermal pacing between decode steps and an optional token
    /// constraint. The compute threads are back to the full pool when it returns.
    #[allow(clippy::too_many_arguments)]
    pub fn generate_paced(
        &self,
        session: &mut Session,
        prompt: &[u32],
        params: &GenerateParams,
        cancel: &AtomicBool,
        mut pacer: Option<&mut Pacer<'_>>,
        constraint: Option<&mut dyn TokenConstraint>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation> {
        if let Some(p) = pacer.as_deref_mut() {
            self.model
                .set_reduced_threads(p.before_prefill().reduced_threads);
        }
        let result = self.generate_inner(
            session, prompt, params, cancel, &mut pacer, constraint, on_text,
        );
        self.model.set_reduced_threads(false);
        let mut generation = result?;
        if let Some(p) = pacer {
            (
                generation.stats.paced_seconds,
                generation.stats.paused_seconds,
            ) = p.waits();
        }
        Ok(generation)
    }

    #[allow(clippy::too_many_arguments)]
    fn generate_inner(
        &self,
        session: &mut Session,
        prompt: &[u32],
        params: &GenerateParams,
        cancel: &AtomicBool,
        pacer: &mut Option<&mut Pacer<'_>>,
        mut constraint: Option<&mut dyn TokenConstraint>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation> {
        if prompt.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        if prompt.len() >= session.context() {
            return Err(Error::PromptTooLong {
                tokens: prompt.len(),
                context: session.context(),
            });
        }
        let mut sampler = Sampler::new(params.sampling.clone())?;
        let tokenizer = self.tokenizer();
        let stop_ids = tokenizer.stop_ids();
        let t0 = Instant::now();
        let ops_at_start = self.model.ops();
        let profile_at_start = self.model.profile();
        // every prompt token is reused when the session holds exactly the prompt with its last
        // hidden state (a sent draft); otherwise at least the last one is run again
        let reused = if session.tokens() == prompt && session.has_last_hidden() {
            prompt.len()
        } else {
            common_prefix(session.tokens(), prompt).min(prompt.len() - 1)
        };
        let hidden = session
            .sync_to(&self.model, prompt)?
            .ok_or_else(|| Error::InvalidArgument("nothing to generate from".into()))?;
        let mut logits = self.logits_vec(&hidden)?;
        let prefill_seconds = t0.elapsed().as_secs_f64();
        let ops_after_prefill = self.model.ops();
        let profile_after_prefill = self.model.profile();

        let mut stream = tokenizer.stream();
        let mut filter = StopFilter::new(&params.stop_strings);
        let mut stop_string = None;
        let mut ids = Vec::new();
        let mut text = String::new();
        let mut history: Vec<u32> = prompt.to_vec();
        let mut first_token_at = None;
        let mut constrained_tokens = 0usize;
        let mut constraint_seconds = 0.0f64;
        // CUDA with the fused decode: each step samples its next token on the device, so
        // the logits never come back (a constraint needs them on the host: not then)
        let fused = constraint
            .is_none()
            .then(|| self.model.fused_sampling(&params.sampling))
            .flatten();
        let mut device_next: Option<u32> = None;
        let mut device_steps = 0usize;
        // speculation: where every row of a check is summed as a decode step sums it (the host
        // backend) and each token is chosen on the host with no constraint
        let host_sampled = fused.is_none()
            && constraint.is_none()
            && self.model.backend() == crate::backend::BackendKind::Host;
        let speculation = match params.speculation {
            Speculation::Auto if self.assistant().is_some() => Speculation::Mtp,
            Speculation::Auto => Speculation::Lookup,
            chosen => chosen,
        };
        if matches!(speculation, Speculation::Mtp | Speculation::MtpUntimed)
            && self.assistant().is_none()
        {
            return Err(Error::InvalidArgument(
                "speculation `mtp` needs a multi-token-prediction assistant loaded beside the \
                 model (--assistant)"
                    .into(),
            ));
        }
        let mut drafter = match speculation {
            Speculation::Lookup if host_sampled => Some(Drafter::Lookup(PromptLookup::default())),
            Speculation::LookupUntimed if host_sampled => {
                Some(Drafter::Lookup(PromptLookup::untimed()))
            }
            Speculation::Mtp if host_sampled => Some(Drafter::Mtp(DraftControl::default())),
            Speculation::MtpUntimed if host_sampled => Some(Drafter::Mtp(DraftControl::untimed())),
            _ => None,
        };
        // the hidden state the token being emitted was chosen from (the assistant drafts from
        // it; the fused path, which keeps none, does not speculate)
        let mut last_hidden = hidden;
        // tokens a check decided, in order: (token, whether its keys are in the cache already)
        let mut decided: std::collections::VecDeque<(u32, bool)> = Default::default();
        // whether the last token pushed has no keys in the cache (no step ran after it)
        let mut unstepped = false;
        let mut emit = |piece: &str, text: &mut String| {
            if !piece.is_empty() {
                text.push_str(piece);
                on_text(piece);
            }
        };
        let stop_reason = loop {
            if cancel.load(Ordering::Relaxed) {
                break StopReason::Cancelled;
            }
            if ids.len() >= params.max_tokens {
                break StopReason::MaxTokens;
            }
            let mut complete = false;
            // a kept draft: its keys are in the cache, and the token after it is decided
            let mut cached = false;
            unstepped = false;
            let id = match constraint.as_deref_mut() {
                None if !decided.is_empty() => {
                    let (id, in_cache) = decided.pop_front().unwrap_or_default();
                    cached = in_cache;
                    id
                }
                None if device_next.is_some() => device_next.take().unwrap_or_default(),
                None => sampler.sample(&mut logits, &history),
                Some(c) => {
                    let started = Instant::now();
                    let allowed = c.allowed().map_err(|e| Error::Constraint(e.0))?;
                    if apply_mask(&mut logits, allowed) == 0 {
                        return Err(Error::Constraint(
                            "the constraint allows no token of this vocabulary".into(),
                        ));
                    }
                    constraint_seconds += started.elapsed().as_secs_f64();
                    let id = sampler.sample(&mut logits, &history);
                    let started = Instant::now();
                    complete = c.accept(id).map_err(|e| Error::Constraint(e.0))?;
                    constraint_seconds += started.elapsed().as_secs_f64();
                    constrained_tokens += 1;
                    id
                }
            };
            first_token_at.get_or_insert_with(|| t0.elapsed().as_secs_f64());
            if stop_ids.contains(&id) && !params.ignore_eos {
                break StopReason::EndOfTurn;
            }
            ids.push(id);
            history.push(id);
            unstepped = true;
            if let Some(piece) = stream.push(id) {
                let (out, hit) = filter.feed(&piece);
                emit(&out, &mut text);
                if hit.is_some() {
                    stop_string = hit;
                    break StopReason::StopString;
                }
            }
            if complete {
                break StopReason::ConstraintDone;
            }
            if ids.len() >= params.max_tokens {
                break StopReason::MaxTokens;
            }
            // the positions left as without speculation: kept drafts still to be emitted (and
            // this one, when it is one) already hold theirs
            let ahead = decided.iter().filter(|d| d.1).count() + usize::from(cached);
            if session.remaining() + ahead == 0 {
                break StopReason::ContextFull;
            }
            if let Some(p) = pacer.as_deref_mut() {
                self.model
                    .set_reduced_threads(p.before_step(cancel).reduced_threads);
            }
            if cancel.load(Ordering::Relaxed) {
                break StopReason::Cancelled;
            }
            if cached {
                continue;
            }
            if let Some(drafter) = drafter.as_mut() {
                // the check runs the last token and the draft as one step of at most a chunk
                let room = crate::speculate::MAX_DRAFT
                    .min(session.chunk().saturating_sub(1))
                    .min(session.remaining().saturating_sub(1))
                    .min(params.max_tokens.saturating_sub(ids.len()));
                // timed with the drafting: an assistant's steps are part of what a check costs
                let started = Instant::now();
                let draft = match drafter {
                    Drafter::Lookup(lookup) => lookup.draft(&history, room),
                    Drafter::Mtp(control) => match control.next_length(room) {
                        0 => Vec::new(),
                        n => self.draft_mtp(session, id, &last_hidden, n)?,
                    },
                };
                if !draft.is_empty() {
                    let checked = self.check_draft(session, &mut sampler, &history, id, &draft)?;
                    drafter.control_mut().record(
                        draft.len(),
                        checked.kept,
                        started.elapsed().as_secs_f64(),
                    );
                    decided.extend(draft[..checked.kept].iter().map(|&t| (t, true)));
                    decided.push_back((checked.next, false));
                    last_hidden = checked.next_hidden;
                    continue;
                }
            }
            match &fused {
                Some(sampling) => {
                    if device_steps == 0 {
                        self.model
                            .fused_begin(&history, sampling, &mut || sampler.draw())?;
                    }
                    let next =
                        session.step_fused(&self.model, id, device_steps, sampling, &mut || {
                            sampler.draw()
                        })?;
                    device_next = Some(next);
                    device_steps += 1;
                }
                None => {
                    let started = Instant::now();
                    let hidden = session.prefill(&self.model, &[id])?;
                    logits = self.logits_vec(&hidden)?;
                    if let Some(drafter) = drafter.as_mut() {
                        drafter
                            .control_mut()
                            .record_step(started.elapsed().as_secs_f64());
                    }
                    last_hidden = hidden;
                }
            }
        };
        // kept drafts past the last token emitted leave the cache, so that the session holds
        // what it would without speculation: the prompt and every token emitted, the last one
        // only when a step ran after it
        if drafter.is_some() {
            let held = prompt.len() + ids.len() - usize::from(unstepped);
            if session.tokens().len() > held {
                session.truncate(&self.model, held)?;
            }
        }
        if stop_reason != StopReason::StopString {
            if let Some(rest) = stream.finish() {
                let (out, _) = filter.feed(&rest);
                emit(&out, &mut text);
            }
            let rest = filter.finish();
            emit(&rest, &mut text);
        }
        let total = t0.elapsed().as_secs_f64();
        let ttft = first_token_at.unwrap_or(total);
        let decode_seconds = (total - ttft).max(0.0);
        let processed = prompt.len() - reused;
        let stats = GenerationStats {
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            prefill_seconds,
            time_to_first_token_seconds: ttft,
            generated_tokens: ids.len(),
            decode_seconds,
            // the first token comes from the prefill; the rest each took one decode step
            decode_tokens_per_second: if ids.len() > 1 && decode_seconds > 0.0 {
                (ids.len() - 1) as f64 / decode_seconds
            } else {
                0.0
            },
            prefill_tokens_per_second: if prefill_seconds > 0.0 {
                processed as f64 / prefill_seconds
            } else {
                0.0
            },
            paced_seconds: 0.0,
            paused_seconds: 0.0,
            constrained_tokens,
            constraint_seconds,
            prefill_ops: ops_after_prefill - ops_at_start,
            decode_ops: self.model.ops() - ops_after_prefill,
            draft_tokens: drafter.as_ref().map_or(0, |d| d.control().drafted),
            accepted_draft_tokens: drafter.as_ref().map_or(0, |d| d.control().kept),
            speculative_checks: drafter.as_ref().map_or(0, |d| d.control().checks),
            speculation: if drafter.is_some() {
                speculation
            } else {
                Speculation::Off
            },
            prefill_profile: profile_after_prefill.since(&profile_at_start),
            decode_profile: self.model.profile().since(&profile_after_prefill),
        };
        Ok(Generation {
            ids,
            text,
            stop_reason,
            stop_string,
            stats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::StopFilter;

    #[test]
    fn stop_filter_holds_back_partial_matches() {
        let mut f = StopFilter::new(&["STOP".to_string()]);
        assert_eq!(f.feed("hello S"), ("hello ".to_string(), None));
        assert_eq!(f.feed("T"), (String::new(), None));
        assert_eq!(f.feed("x"), ("STx".to_string(), None));
        assert_eq!(
            f.feed(" aSTOPb"),
            (" a".to_string(), Some("STOP".to_string()))
        );
    }

    #[test]
    fn the_stop_that_starts_first_is_the_one_reported() {
        let mut f = StopFilter::new(&["b".to_string(), "ab".to_string(), "abc".to_string()]);
        assert_eq!(f.feed("xabcd"), ("x".to_string(), Some("abc".to_string())));
    }

    #[test]
    fn stop_filter_without_stops_passes_everything() {
        let mut f = StopFilter::new(&[]);
        assert_eq!(f.feed("abc"), ("abc".to_string(), None));
        assert_eq!(f.finish(), "");
    }
}
