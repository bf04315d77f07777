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
//! Memory stays bounded whatever the document's size: its text is read as a stream
//! ([`documents::Document::text`]) and cut by a [`documents::ChunkStream`] holding a bounded
//! window; a level's summaries are not kept in memory but read back from the store one by one
//! as the next level groups them, so at most one group of summaries is held at a time. A first
//! pass over the stream counts the chunks (tokenizing is thousands of times faster than
//! summarizing), so progress has its true total from the start. The job runs on the engine's one
//! session between user turns, waits while the engine asks background work to pause
//! (thermal state serious or worse), and stops between two decode steps when cancelled.

mod pages;
pub mod plan;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use documents::{ChunkStream, ChunkText, Document};
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
const PROMPT_VERSION: u32 = 3;

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
    /// The longest text read from one page of pictures (a scan, a photo), in tokens: a dense
    /// page of print is about 700.
    pub page_tokens: usize,
    /// Speculative decoding of the summaries (greedy either way: the same summaries).
    #[serde(skip)]
    pub speculation: engine::Speculation,
}

impl Default for DocumentParams {
    fn default() -> Self {
        DocumentParams {
            context: 2048,
            summary_tokens: 128,
            force: false,
            page_tokens: 1024,
            speculation: engine::Speculation::default(),
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
    /// The steps are pages read as pictures (a scan, a photo), not yet summaries.
    pub reading_pages: bool,
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
    /// The decoding of the summaries this run made (and of its pages' reading).
    pub decode: DecodeTotals,
    /// Pages read as pictures (a scanned PDF, a photo); `None` for a document of text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages_read: Option<usize>,
}

/// The decode steps of a job's summaries, summed over them (`companion summarize --json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecodeTotals {
    /// Tokens generated after each summary's first (each of which came from its prefill).
    pub tokens: usize,
    pub seconds: f64,
    /// Speculation: tokens drafted and those the model kept (`engine::speculate`).
    pub draft_tokens: usize,
    pub accepted_draft_tokens: usize,
}

impl DecodeTotals {
    fn add(&mut self, stats: &engine::GenerationStats) {
        self.tokens += stats.generated_tokens.saturating_sub(1);
        self.seconds += stats.decode_seconds;
        self.draft_tokens += stats.draft_tokens;
        self.accepted_draft_tokens += stats.accepted_draft_tokens;
    }

    fn add_totals(&mut self, other: &DecodeTotals) {
        self.tokens += other.tokens;
        self.seconds += other.seconds;
        self.draft_tokens += other.draft_tokens;
        self.accepted_draft_tokens += other.accepted_draft_tokens;
    }

    pub fn tokens_per_second(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.tokens as f64 / self.seconds)
    }
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
    /// The engine session the summaries are made on, opened at the first one: the open
    /// conversation's session (and the user's draft) are left as they are.
    session: Option<engine::ScratchSession>,
    record: DocumentRecord,
    progress: JobProgress,
    started: Instant,
    computed: usize,
    computed_seconds: f64,
    decode: DecodeTotals,
    on_progress: F,
}

impl DocumentJob<'_> {
    /// Summarize the file at `path`, calling `on_progress` as it goes.
    pub fn run(
        &self,
        path: &Path,
        on_progress: impl FnMut(&JobProgress),
    ) -> Result<DocumentSummary> {
        let document = Document::open(path)?;
        self.run_document(&document, on_progress)
    }

    /// Summarize a document already opened (a caller that wants to refuse a bad file before
    /// loading the model opens it first).
    pub fn run_document(
        &self,
        document: &Document,
        mut on_progress: impl FnMut(&JobProgress),
    ) -> Result<DocumentSummary> {
        let Some(pages) = document.pictures() else {
            return self.summarize_text(document, None, &mut on_progress);
        };
        // a scan or a photo: its pages are read first (each kept as it is read), then their
        // text is summarized as any document's; progress counts both
        let read = self.read_pictures(document, pages, &mut on_progress)?;
        let offset = pages.len();
        let mut summary = self.summarize_text(
            &read.document,
            Some(pages::PAGE_PROMPT_VERSION),
            &mut |p: &JobProgress| {
                let mut p = p.clone();
                p.done += offset;
                p.total += offset;
                p.reused += read.reused;
                on_progress(&p);
            },
        )?;
        summary.reused += read.reused;
        summary.pages_read = Some(offset);
        summary.decode.add_totals(&read.decode);
        Ok(summary)
    }

    /// Summarize a document of text; `pictures`: its text was read from its pictures with
    /// this version of the page prompt (part of what its summaries are stored under).
    fn summarize_text(
        &self,
        document: &Document,
        pictures: Option<u32>,
        on_progress: &mut dyn FnMut(&JobProgress),
    ) -> Result<DocumentSummary> {
        let started = Instant::now();
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
            sha256: document.sha256.clone(),
            model: self.engine.model_sha256()?,
            settings: match pictures {
                None => serde_json::json!({
                    "context": self.params.context,
                    "summaryTokens": self.params.summary_tokens,
                    "prompt": PROMPT_VERSION,
                }),
                Some(pages) => serde_json::json!({
                    "context": self.params.context,
                    "summaryTokens": self.params.summary_tokens,
                    "prompt": PROMPT_VERSION,
                    "pages": pages,
                }),
            }
            .to_string(),
        };
        let shown_path = absolute(&document.path).display().to_string();
        let mut record = self
            .store
            .open_document(&key, &shown_path, document.byte_count)?;
        if self.params.force {
            self.store.reset_document(record.id)?;
            record.chunk_count = None;
        }
        let summary_of =
            |done: DocumentRecord, reused, from_store, chunks, levels, tokens, decode| {
                DocumentSummary {
                    summary: done.summary.clone().unwrap_or_default(),
                    format: document.format.name(),
                    encoding: document.encoding,
                    chunks,
                    levels,
                    input_tokens: tokens,
                    reused,
                    from_store,
                    seconds: started.elapsed().as_secs_f64(),
                    decode,
                    document: done,
                    pages_read: None,
                }
            };
        // a finished document is answered before any tokenizing: that is the point of storing it
        if !self.params.force
            && let Some(done) = self.store.finished_document(&key)?
        {
            let totals = self.store.document_totals(done.id)?;
            let chunks = done.chunk_count.unwrap_or(0);
            return Ok(summary_of(
                done,
                totals.summaries,
                true,
                chunks,
                totals.levels.max(1),
                totals.input_tokens,
                DecodeTotals::default(),
            ));
        }
        // how many chunks: known from an earlier run of this job, else counted in a first pass
        let chunk_count = match record.chunk_count {
            Some(n) => n,
            None => {
                let mut n = 0;
                for chunk in self.chunks(document, budget)? {
                    chunk?;
                    n += 1;
                }
                self.store.set_document_chunk_count(record.id, n)?;
                record.chunk_count = Some(n);
                n
            }
        };
        if chunk_count == 0 {
            // the document was checked for text when opened; it changed since
            return Err(documents::Error::NoText {
                path: document.path.clone(),
                hint: Some("the file changed while it was read".into()),
            }
            .into());
        }
        let total =
            chunk_count + plan::reduce_steps(chunk_count, budget, self.params.summary_tokens);
        let mut run = Run {
            job: self,
            session: None,
            record,
            progress: JobProgress {
                level: 0,
                done: 0,
                total,
                reused: 0,
                elapsed_seconds: 0.0,
                remaining_seconds: None,
                paused: false,
                reading_pages: false,
            },
            started,
            computed: 0,
            computed_seconds: 0.0,
            decode: DecodeTotals::default(),
            on_progress,
        };
        run.report();

        // map: every chunk of the document, as the stream gives them
        let mut input_tokens = 0;
        let mut chunks = 0;
        for (idx, chunk) in self.chunks(document, budget)?.enumerate() {
            let chunk = chunk?;
            input_tokens += chunk.tokens;
            chunks += 1;
            run.step(0, idx, CHUNK_INSTRUCTION, &chunk.text, chunk.tokens)?;
        }
        if chunks != chunk_count {
            // the file changed between the passes: its hash no longer names what was read
            return Err(documents::Error::Unreadable {
                path: document.path.clone(),
                source: std::io::Error::other("the file changed while it was summarized"),
            }
            .into());
        }
        // reduce: groups of summaries, level by level, until one is left
        let mut items = chunks;
        let mut depth = 0;
        while items > 1 {
            depth += 1;
            let groups = run.count_groups(depth - 1, items, budget)?;
            // what is known now replaces the estimate for this level and those above
            run.progress.total = run.progress.done
                + groups
                + plan::reduce_steps(groups, budget, self.params.summary_tokens);
            run.progress.level = depth;
            run.reduce_level(depth, items, budget)?;
            items = groups;
        }
        let summary = run.summary_at(depth, 0)?;
        self.store.finish_document(run.record.id, &summary)?;
        let document_record = self
            .store
            .find_document(&key)?
            .unwrap_or(run.record.clone());
        Ok(summary_of(
            document_record,
            run.progress.reused,
            false,
            chunks,
            depth + 1,
            input_tokens,
            run.decode,
        ))
    }

    /// The document's chunks, streamed: each fits the budget beside the instruction.
    fn chunks<'d>(
        &self,
        document: &'d Document,
        budget: usize,
    ) -> Result<impl Iterator<Item = Result<ChunkText>> + 'd> {
        let tokenizer = self.engine.tokenizer().clone();
        let mut text = document.text()?;
        let read = move || text.next_piece().map_err(Error::from);
        let count =
            move |piece: &str| -> Result<usize> { Ok(tokenizer.encode(piece, false)?.len()) };
        Ok(ChunkStream::new(read, budget, count))
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
    ) -> Result<()> {
        if self.stored(level, idx)?.is_some() {
            self.progress.reused += 1;
            self.advance();
            return Ok(());
        }
        self.wait_while_paused()?;
        let began = Instant::now();
        let session = match &self.session {
            Some(s) => s.id(),
            None => self.session.insert(self.job.engine.open_session()?).id(),
        };
        let Some(summary) = summarize(self.job, session, instruction, text, &mut self.decode)?
        else {
            return Err(self.cancelled());
        };
        self.save(level, idx, input_tokens, &summary)?;
        self.computed += 1;
        self.computed_seconds += began.elapsed().as_secs_f64();
        self.advance();
        Ok(())
    }

    fn carry(
        &mut self,
        level: usize,
        idx: usize,
        summary: &str,
        input_tokens: usize,
    ) -> Result<()> {
        if self.stored(level, idx)?.is_none() {
            self.save(level, idx, input_tokens, summary)?;
        }
        self.advance();
        Ok(())
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

    fn stored(&self, level: usize, idx: usize) -> Result<Option<String>> {
        Ok(self
            .job
            .store
            .chunk_summary(self.record.id, level, idx)?
            .map(|c| c.summary))
    }

    /// A summary this job has made (or found): read back from the store.
    fn summary_at(&self, level: usize, idx: usize) -> Result<String> {
        self.stored(level, idx)?.ok_or_else(|| {
            memory::Error::InvalidArgument(format!(
                "the summary {idx} of level {level} is missing from the store"
            ))
            .into()
        })
    }

    /// How many groups the `items` summaries of `level` make.
    fn count_groups(&self, level: usize, items: usize, budget: usize) -> Result<usize> {
        let tokenizer = self.job.engine.tokenizer();
        let mut grouping = plan::Grouping::new(budget);
        let mut groups = 0;
        for idx in 0..items {
            let tokens = tokenizer
                .encode(&self.summary_at(level, idx)?, false)?
                .len();
            groups += usize::from(grouping.add(tokens));
        }
        Ok(groups)
    }

    /// Summarize the groups of level `depth - 1`'s `items` summaries into level `depth`,
    /// holding one group at a time.
    fn reduce_level(&mut self, depth: usize, items: usize, budget: usize) -> Result<()> {
        let tokenizer = self.job.engine.tokenizer().clone();
        let mut grouping = plan::Grouping::new(budget);
        let mut group: Vec<(String, usize)> = Vec::new();
        let mut idx = 0;
        for item in 0..items {
            let summary = self.summary_at(depth - 1, item)?;
            let tokens = tokenizer.encode(&summary, false)?.len();
            if grouping.add(tokens) && !group.is_empty() {
                self.reduce_group(depth, idx, &std::mem::take(&mut group))?;
                idx += 1;
            }
            group.push((summary, tokens));
        }
        if !group.is_empty() {
            self.reduce_group(depth, idx, &group)?;
        }
        Ok(())
    }

    fn reduce_group(&mut self, depth: usize, idx: usize, group: &[(String, usize)]) -> Result<()> {
        let input_tokens =
            group.iter().map(|(_, t)| t).sum::<usize>() + plan::SEAM_TOKENS * (group.len() - 1);
        if let [(lone, _)] = group {
            // a lone summary is carried up as it is: summarizing it again only loses
            return self.carry(depth, idx, lone, input_tokens);
        }
        let text = group
            .iter()
            .map(|(s, _)| s.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        self.step(depth, idx, COMBINE_INSTRUCTION, &text, input_tokens)
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
fn summarize(
    job: &DocumentJob<'_>,
    session: engine::SessionId,
    instruction: &str,
    text: &str,
    decode: &mut DecodeTotals,
) -> Result<Option<String>> {
    let ids = chat_ids(job.engine, instruction, text)?;
    let needed = ids.len() + job.params.summary_tokens;
    if needed > job.params.context {
        // the budget arithmetic keeps this from happening; say so plainly if it ever does
        return Err(Error::MessageTooLong {
            tokens: needed,
            context: job.params.context,
        });
    }
    let mut params =
        crate::summarizer::summary_params(job.params.summary_tokens, job.params.speculation);
    params.stop_strings.push(SEPARATOR.to_string());
    let handle = job.engine.generate_on(session, Prompt::Ids(ids), params)?;
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
    decode.add(&generation.stats);
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
