//! Summarizing a document far longer than the context, as a resumable job — the API the CLI
//! uses now and the app will call. Map-reduce, as in the usual long-document recipe (and
//! llama.cpp's context-bounded prompting): the text (from the `documents` crate) is cut into
//! chunks that fit beside the instruction and the summary, each chunk is summarized (level 0),
//! then consecutive summaries are combined in groups that fit (level 1, 2, …) until one is
//! left. Every summary is stored in the memory database the moment it exists, keyed by the
//! content's SHA-256, the model and the settings, so a cancelled or crashed job resumes where
//! it stopped and a finished document is answered from the store. Generation is greedy with a
//! repetition penalty (as [`crate::EngineSummarizer`]): the same document gives the same
//! summaries, which is what makes a resumed job equal to an uninterrupted one.
//!
//! Memory stays bounded by the document's text, never by its tokens: chunks are byte ranges
//! of the text, and only one chunk's tokens exist at a time. The job runs on the engine's one
//! session between user turns, waits while the engine asks background work to pause
//! (thermal state serious or worse), and stops between two decode steps when cancelled.

pub mod plan;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use documents::Extracted;
use engine::{ChatMessage, EngineHandle, Prompt, StopReason};
use memory::{ChunkSummary, DocumentKey, DocumentRecord, Store};
use serde::Serialize;

use crate::error::{Error, Result};

// The instruction follows the text: a small model given it first tends to echo it back.
const CHUNK_INSTRUCTION: &str =
    "Summarize the text above in a few sentences. Keep names, places, numbers and events.";
const COMBINE_INSTRUCTION: &str = "The text above is a series of summaries of consecutive parts of one document. Combine them into one summary of a few sentences, in order. Keep names, places, numbers and events.";

/// Changes whenever the prompts or the way chunks are cut change: stored summaries made the
/// old way are then not reused.
const PROMPT_VERSION: u32 = 2;

/// The line between the text and the instruction. A small model that echoes its prompt
/// reproduces it before repeating the instruction, so the summary stops there.
const SEPARATOR: &str = "\n---";

/// How often a paused job looks again at the thermal state.
const PAUSE_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentParams {
    /// The engine's context in tokens: chunk, instruction and summary must fit in it.
    pub context: usize,
    /// The longest summary, in tokens, of a chunk or of a group.
    pub summary_tokens: usize,
    /// Summarize again even if this content was already summarized with these settings.
    pub force: bool,
}

impl Default for DocumentParams {
    fn default() -> Self {
        DocumentParams {
            context: 2048,
            summary_tokens: 128,
            force: false,
        }
    }
}

/// Where a job is, reported before and after every step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobProgress {
    /// 0 while chunks of the document are summarized, then the level being combined.
    pub level: usize,
    /// Summaries made or found in the store.
    pub done: usize,
    /// All summaries the job will make, as far as known (later levels are estimated).
    pub total: usize,
    /// Of `done`, those that were already stored by an earlier run.
    pub reused: usize,
    pub elapsed_seconds: f64,
    /// From the pace of the steps computed in this run; `None` before the first.
    pub remaining_seconds: Option<f64>,
    /// Waiting for the device to cool down.
    pub paused: bool,
}

/// A finished job.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentSummary {
    pub summary: String,
    pub document: DocumentRecord,
    /// `text`, `markdown`, `html` or `pdf`.
    pub format: &'static str,
    pub encoding: Option<&'static str>,
    /// Level-0 chunks.
    pub chunks: usize,
    /// Levels of summaries, the chunks' included.
    pub levels: usize,
    /// Tokens of the document's text, as chunked.
    pub input_tokens: usize,
    /// Summaries taken from the store instead of made.
    pub reused: usize,
    /// The whole summary came from the store: nothing was generated.
    pub from_store: bool,
    pub seconds: f64,
    /// Every stored summary, by level and index.
    pub chunk_summaries: Vec<ChunkSummary>,
}

/// One document summarization on an engine and a store. `cancel` may be set from any thread.
pub struct DocumentJob<'a> {
    pub engine: &'a EngineHandle,
    pub store: &'a Store,
    pub params: DocumentParams,
    pub cancel: &'a AtomicBool,
}

/// The state a running job carries between steps.
struct Run<'a, F> {
    job: &'a DocumentJob<'a>,
    record: DocumentRecord,
    stored: Vec<ChunkSummary>,
    progress: JobProgress,
    started: Instant,
    computed: usize,
    computed_seconds: f64,
    on_progress: F,
}

impl DocumentJob<'_> {
    /// Summarize the file at `path`, calling `on_progress` as it goes.
    pub fn run(
        &self,
        path: &Path,
        on_progress: impl FnMut(&JobProgress),
    ) -> Result<DocumentSummary> {
        let extracted = documents::extract(path)?;
        self.run_extracted(path, &extracted, on_progress)
    }

    /// Summarize a document already read from `path` (a caller that wants to refuse a bad
    /// file before loading the model extracts it first).
    pub fn run_extracted(
        &self,
        path: &Path,
        extracted: &Extracted,
        on_progress: impl FnMut(&JobProgress),
    ) -> Result<DocumentSummary> {
        let started = Instant::now();
        let tokenizer = self.engine.tokenizer();
        let count = |text: &str| tokenizer.encode(text, false).map(|ids| ids.len());
        let instruction_tokens = chat_ids(self.engine, CHUNK_INSTRUCTION, "")?
            .len()
            .max(chat_ids(self.engine, COMBINE_INSTRUCTION, "")?.len());
        let budget = plan::chunk_budget(
            self.params.context,
            instruction_tokens,
            self.params.summary_tokens,
        )
        .ok_or(Error::ContextTooSmall {
            context: self.params.context,
            summary_tokens: self.params.summary_tokens,
        })?;
        let key = DocumentKey {
            sha256: extracted.sha256.clone(),
            model: self.engine.model_sha256()?,
            settings: serde_json::json!({
                "context": self.params.context,
                "summaryTokens": self.params.summary_tokens,
                "prompt": PROMPT_VERSION,
            })
            .to_string(),
        };
        let shown_path = absolute(path).display().to_string();
        let mut record = self
            .store
            .open_document(&key, &shown_path, extracted.byte_count)?;
        if self.params.force {
            self.store.reset_document(record.id)?;
        }
        // a finished document is answered before any tokenizing: that is the point of storing it
        if !self.params.force
            && let Some(done) = self.store.finished_document(&key)?
        {
            let stored = self.store.chunk_summaries(done.id)?;
            return Ok(DocumentSummary {
                summary: done.summary.clone().unwrap_or_default(),
                format: extracted.format.name(),
                encoding: extracted.encoding,
                chunks: done.chunk_count.unwrap_or(0),
                levels: stored.iter().map(|c| c.level + 1).max().unwrap_or(1),
                input_tokens: stored
                    .iter()
                    .filter(|c| c.level == 0)
                    .map(|c| c.input_tokens)
                    .sum(),
                reused: stored.len(),
                from_store: true,
                seconds: started.elapsed().as_secs_f64(),
                chunk_summaries: stored,
                document: done,
            });
        }
        let chunks = documents::split(&extracted.text, budget, count)?;
        self.store
            .set_document_chunk_count(record.id, chunks.len())?;
        record.chunk_count = Some(chunks.len());
        let stored = self.store.chunk_summaries(record.id)?;
        let total =
            chunks.len() + plan::reduce_steps(chunks.len(), budget, self.params.summary_tokens);
        let mut run = Run {
            job: self,
            record,
            stored,
            progress: JobProgress {
                level: 0,
                done: 0,
                total,
                reused: 0,
                elapsed_seconds: 0.0,
                remaining_seconds: None,
                paused: false,
            },
            started,
            computed: 0,
            computed_seconds: 0.0,
            on_progress,
        };
        run.report();

        // map: every chunk of the document
        let mut level: Vec<String> = Vec::with_capacity(chunks.len());
        for (idx, chunk) in chunks.iter().enumerate() {
            let summary = run.step(
                0,
                idx,
                CHUNK_INSTRUCTION,
                chunk.text(&extracted.text),
                chunk.tokens,
            )?;
            level.push(summary);
        }
        // reduce: groups of summaries, level by level, until one is left
        let mut depth = 0;
        while level.len() > 1 {
            depth += 1;
            let tokens = level
                .iter()
                .map(|s| count(s))
                .collect::<engine::Result<Vec<_>>>()?;
            let groups = plan::group(&tokens, budget);
            // what is known now replaces the estimate for this level and those above
            run.progress.total = run.progress.done
                + groups.len()
                + plan::reduce_steps(groups.len(), budget, self.params.summary_tokens);
            run.progress.level = depth;
            let mut next = Vec::with_capacity(groups.len());
            for (idx, group) in groups.into_iter().enumerate() {
                let input_tokens = tokens[group.clone()].iter().sum::<usize>()
                    + plan::SEAM_TOKENS * (group.len() - 1);
                let summary = if group.len() == 1 {
                    // a lone summary is carried up as it is: summarizing it again only loses
                    run.carry(depth, idx, &level[group.start], input_tokens)?
                } else {
                    let text = level[group].join("\n\n");
                    run.step(depth, idx, COMBINE_INSTRUCTION, &text, input_tokens)?
                };
                next.push(summary);
            }
            level = next;
        }
        let summary = level.pop().unwrap_or_default();
        self.store.finish_document(run.record.id, &summary)?;
        let document = self.store.find_document(&key)?.unwrap_or(run.record);
        let chunk_summaries = self.store.chunk_summaries(document.id)?;
        Ok(DocumentSummary {
            summary,
            document,
            format: extracted.format.name(),
            encoding: extracted.encoding,
            chunks: chunks.len(),
            levels: depth + 1,
            input_tokens: chunks.iter().map(|c| c.tokens).sum(),
            reused: run.progress.reused,
            from_store: false,
            seconds: started.elapsed().as_secs_f64(),
            chunk_summaries,
        })
    }
}

impl<F: FnMut(&JobProgress)> Run<'_, F> {
    /// The summary at (level, idx): from the store when an earlier run made it, else made now
    /// and stored at once.
    fn step(
        &mut self,
        level: usize,
        idx: usize,
        instruction: &str,
        text: &str,
        input_tokens: usize,
    ) -> Result<String> {
        if let Some(summary) = self.stored(level, idx) {
            self.progress.reused += 1;
            self.advance();
            return Ok(summary);
        }
        self.wait_while_paused()?;
        let began = Instant::now();
        let Some(summary) = summarize(self.job, instruction, text)? else {
            return Err(self.cancelled());
        };
        self.save(level, idx, input_tokens, &summary)?;
        self.computed += 1;
        self.computed_seconds += began.elapsed().as_secs_f64();
        self.advance();
        Ok(summary)
    }

    fn carry(
        &mut self,
        level: usize,
        idx: usize,
        summary: &str,
        input_tokens: usize,
    ) -> Result<String> {
        if self.stored(level, idx).is_none() {
            self.save(level, idx, input_tokens, summary)?;
        }
        self.advance();
        Ok(summary.to_string())
    }

    /// Commit one summary at once: a crash after this point does not lose it.
    fn save(&self, level: usize, idx: usize, input_tokens: usize, summary: &str) -> Result<()> {
        let chunk = ChunkSummary {
            level,
            idx,
            input_tokens,
            summary: summary.to_string(),
        };
        Ok(self.job.store.put_chunk_summary(self.record.id, &chunk)?)
    }

    fn stored(&self, level: usize, idx: usize) -> Option<String> {
        self.stored
            .binary_search_by(|c| (c.level, c.idx).cmp(&(level, idx)))
            .ok()
            .map(|i| self.stored[i].summary.clone())
    }

    fn advance(&mut self) {
        self.progress.done += 1;
        self.progress.total = self.progress.total.max(self.progress.done);
        self.report();
    }

    fn report(&mut self) {
        self.progress.elapsed_seconds = self.started.elapsed().as_secs_f64();
        self.progress.remaining_seconds = (self.computed > 0).then(|| {
            let per_step = self.computed_seconds / self.computed as f64;
            per_step * self.progress.total.saturating_sub(self.progress.done) as f64
        });
        (self.on_progress)(&self.progress);
    }

    /// Background work waits while the device is hot (thermal state serious or worse).
    fn wait_while_paused(&mut self) -> Result<()> {
        while self.job.engine.background_paused() {
            self.check_cancel()?;
            if !self.progress.paused {
                self.progress.paused = true;
                self.report();
            }
            std::thread::sleep(PAUSE_POLL);
        }
        if self.progress.paused {
            self.progress.paused = false;
            self.report();
        }
        self.check_cancel()
    }

    fn check_cancel(&self) -> Result<()> {
        if self.job.cancel.load(Ordering::Relaxed) {
            return Err(self.cancelled());
        }
        Ok(())
    }

    fn cancelled(&self) -> Error {
        Error::Cancelled {
            done: self.progress.done,
            total: self.progress.total,
        }
    }
}

/// One greedy summary of `text` under `instruction`; `None` when cancelled meanwhile.
fn summarize(job: &DocumentJob<'_>, instruction: &str, text: &str) -> Result<Option<String>> {
    let ids = chat_ids(job.engine, instruction, text)?;
    let needed = ids.len() + job.params.summary_tokens;
    if needed > job.params.context {
        // the budget arithmetic keeps this from happening; say so plainly if it ever does
        return Err(Error::MessageTooLong {
            tokens: needed,
            context: job.params.context,
        });
    }
    let mut params = crate::summarizer::summary_params(job.params.summary_tokens);
    params.stop_strings.push(SEPARATOR.to_string());
    let handle = job.engine.generate(Prompt::Ids(ids), params)?;
    let stop = handle.cancel.clone();
    // text arrives once per decoded token: the job's flag reaches the engine within a step
    let generation = handle.wait(|_| {
        if job.cancel.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
    })?;
    if generation.stop_reason == StopReason::Cancelled || job.cancel.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let summary = generation.text.trim();
    if !summary.is_empty() {
        return Ok(Some(summary.to_string()));
    }
    // never lose a part of the document to an empty summary: keep its opening instead
    let tokenizer = job.engine.tokenizer();
    let ids = tokenizer.encode(text, false)?;
    let opening = tokenizer.decode(&ids[..ids.len().min(job.params.summary_tokens)])?;
    Ok(Some(opening.trim().to_string()))
}

/// The prompt's ids: one user turn, the text then the instruction.
fn chat_ids(engine: &EngineHandle, instruction: &str, text: &str) -> Result<Vec<u32>> {
    let messages = vec![ChatMessage::user(format!(
        "{text}\n{SEPARATOR}\n{instruction}"
    ))];
    Ok(Prompt::Chat(messages).to_ids(engine.tokenizer())?)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
