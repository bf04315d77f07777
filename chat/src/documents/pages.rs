//! Reading a document whose pages are pictures — a scanned PDF, or a photo given as the
//! document — before it is summarized: each page is shown to the model through its vision
//! projector with a transcription prompt, and what it reads is stored at once (as the page's
//! entry of a record of its own), so a cancelled or crashed job resumes at the next page and a
//! document read once is never read again with the same model and prompt.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use documents::{Document, PagePicture, PictureData};
use engine::vision::RgbImage;
use engine::{ChatMessage, Prompt, StopReason};
use memory::DocumentKey;

use super::{DecodeTotals, DocumentJob, JobProgress, Run, absolute};
use crate::error::{Error, Result};

/// What the model is asked of each page. Asked for the text, not a description: the summary
/// that follows wants what the page says.
const PAGE_INSTRUCTION: &str =
    "Transcribe all the text on this page, in reading order. Write only the text of the page.";

/// Changes whenever the page prompt or how a page's text is kept changes: pages read the old
/// way are then read again.
pub(super) const PAGE_PROMPT_VERSION: u32 = 1;

/// A document's pictures, read.
pub(super) struct ReadPages {
    /// The document with what was read as its text.
    pub document: Document,
    /// Pages whose text came from the store.
    pub reused: usize,
    pub decode: DecodeTotals,
}

impl DocumentJob<'_> {
    /// Read every page of `document` (its `pages` pictures), reporting each as a step.
    pub(super) fn read_pictures(
        &self,
        document: &Document,
        pages: &[PagePicture],
        on_progress: &mut dyn FnMut(&JobProgress),
    ) -> Result<ReadPages> {
        let projector = self
            .engine
            .info()
            .projector
            .ok_or_else(|| Error::NoProjector {
                model: self
                    .engine
                    .info()
                    .name
                    .unwrap_or_else(|| "this model".into()),
            })?;
        let key = DocumentKey {
            sha256: document.sha256.clone(),
            model: self.engine.model_sha256()?,
            settings: serde_json::json!({
                "pages": PAGE_PROMPT_VERSION,
                "context": self.params.context,
                "pageTokens": self.params.page_tokens,
            })
            .to_string(),
        };
        let shown_path = absolute(&document.path).display().to_string();
        let mut record = self
            .store
            .open_document(&key, &shown_path, document.byte_count)?;
        if self.params.force {
            self.store.reset_document(record.id)?;
        }
        self.store
            .set_document_chunk_count(record.id, pages.len())?;
        record.chunk_count = Some(pages.len());
        let mut run = Run {
            job: self,
            session: None,
            record,
            progress: JobProgress {
                level: 0,
                done: 0,
                // the summaries to come are not known yet: at least one
                total: pages.len() + 1,
                reused: 0,
                elapsed_seconds: 0.0,
                remaining_seconds: None,
                paused: false,
                reading_pages: true,
            },
            started: Instant::now(),
            computed: 0,
            computed_seconds: 0.0,
            decode: DecodeTotals::default(),
            on_progress,
        };
        run.report();
        let mut text = String::new();
        for (idx, page) in pages.iter().enumerate() {
            let read = match run.stored(0, idx)? {
                Some(read) => {
                    run.progress.reused += 1;
                    read
                }
                None => run.read_page(idx, page, projector.tokens_per_image)?,
            };
            run.advance_page();
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&read);
        }
        Ok(ReadPages {
            document: document.read_as(&text)?,
            reused: run.progress.reused,
            decode: run.decode,
        })
    }
}

impl<F: FnMut(&JobProgress)> Run<'_, F> {
    /// Show one page to the model and keep what it read (committed at once).
    fn read_page(&mut self, idx: usize, page: &PagePicture, per_picture: usize) -> Result<String> {
        self.wait_while_paused()?;
        let began = Instant::now();
        let image = Arc::new(picture_of(page)?);
        let session = match &self.session {
            Some(s) => s.id(),
            None => self.session.insert(self.job.engine.open_session()?).id(),
        };
        let prompt = Prompt::Chat(vec![
            ChatMessage::user(PAGE_INSTRUCTION).with_images(vec![image]),
        ]);
        let prompt_tokens = self.job.engine.prompt_tokens(&prompt)?;
        let room = self.job.params.context.saturating_sub(prompt_tokens);
        if room < 16 {
            return Err(Error::MessageTooLong {
                tokens: prompt_tokens + 16,
                context: self.job.params.context,
            });
        }
        let params = crate::summarizer::summary_params(
            room.min(self.job.params.page_tokens.max(1)),
            self.job.params.speculation,
        );
        let handle = self.job.engine.generate_on(session, prompt, params)?;
        let stop = handle.cancel.clone();
        let cancel = self.job.cancel;
        let generation = handle.wait(|_| {
            if cancel.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
            }
        })?;
        if generation.stop_reason == StopReason::Cancelled || cancel.load(Ordering::Relaxed) {
            return Err(self.cancelled());
        }
        self.decode.add(&generation.stats);
        // a page the model read nothing in keeps its place in the text
        let read = match generation.text.trim() {
            "" => format!("[page {}: no text read]", page.page),
            read => format!("[page {}]\n{read}", page.page),
        };
        self.save(0, idx, per_picture, &read)?;
        self.computed += 1;
        self.computed_seconds += began.elapsed().as_secs_f64();
        Ok(read)
    }

    fn advance_page(&mut self) {
        self.progress.done += 1;
        self.report();
    }
}

/// A page's picture as the engine reads it: a picture file decoded (bounded, checked), or
/// pixels taken as they are.
fn picture_of(page: &PagePicture) -> Result<RgbImage> {
    let bad = |e: engine::Error| {
        let message = match e {
            engine::Error::InvalidArgument(m) => m,
            other => other.to_string(),
        };
        Error::Picture(format!("page {}: {message}", page.page))
    };
    match &page.picture {
        PictureData::File(bytes) => crate::picture::Picture::decode(bytes.clone())
            .map(|p| p.image().as_ref().clone())
            .map_err(|e| Error::Picture(format!("page {}: {e}", page.page))),
        PictureData::Rgb {
            width,
            height,
            pixels,
        } => RgbImage::new(*width, *height, pixels.clone()).map_err(bad),
    }
}
