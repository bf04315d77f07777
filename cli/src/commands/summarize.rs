//! `companion summarize FILE`: summarize a document far longer than the context with
//! `chat::DocumentJob` (a scanned PDF or a photo read page by page through the model's vision
//! projector first), a progress bar on stderr, the summary on stdout (`--json`: one object
//! with the summary, the chunks, throughput and peak RSS). Ctrl-C stops between two decode
//! steps; what was summarized is kept, and the same command resumes from there.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use chat::{DocumentJob, DocumentParams, JobProgress};
use clap::Args as ClapArgs;

use crate::options::{ModelOptions, SpeculationOption, StoreOptions};
use crate::output::outln;

const BAR_WIDTH: usize = 24;

#[derive(ClapArgs)]
pub struct Args {
    /// The document: .txt, .md, .html or .pdf (text layer)
    file: PathBuf,
    /// Print one JSON object at the end instead of the summary
    #[arg(long)]
    json: bool,
    /// Summarize again even if this content was already summarized with these settings
    #[arg(long)]
    force: bool,
    /// The longest summary of a chunk or of a group of summaries, in tokens
    #[arg(long, default_value_t = 128, value_name = "N", value_parser = clap::value_parser!(u32).range(8..=4096))]
    summary_tokens: u32,
    /// The longest text read from one page of a scanned PDF or a photo, in tokens
    #[arg(long, default_value_t = 1024, value_name = "N", value_parser = clap::value_parser!(u32).range(16..=8192))]
    page_tokens: u32,
    #[command(flatten)]
    speculation: SpeculationOption,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
    #[command(flatten)]
    model: ModelOptions,
}

pub fn run(args: Args) -> Result<()> {
    // read the file before loading the model: a bad input is answered at once
    let document = documents::Document::open(&args.file)?;
    let model_path = args.model.model_path();
    if document.pictures().is_some() && args.model.projector_path(&model_path).is_none() {
        let model = model_path
            .file_name()
            .map_or_else(|| "the model".into(), |n| n.to_string_lossy().into_owned());
        return Err(
            anyhow::Error::new(chat::Error::NoProjector { model }).context(format!(
                "{} is pictures (scanned pages or a photo)",
                args.file.display()
            )),
        );
    }
    let store = args.store.open()?;
    let engine = args.model.spawn()?;
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        ctrlc::set_handler(move || cancel.store(true, Ordering::Relaxed))
            .context("cannot install the Ctrl-C handler")?;
    }
    let job = DocumentJob {
        engine: &engine,
        store: &store,
        params: DocumentParams {
            context: args.model.context as usize,
            summary_tokens: args.summary_tokens as usize,
            force: args.force,
            speculation: args.speculation.speculate,
            page_tokens: args.page_tokens as usize,
        },
        cancel: &cancel,
    };
    let mut stderr = std::io::stderr();
    let mut drew = false;
    // a base model's notice once the model is at work: a refused input stays one error line
    let mut base_notice = crate::options::base_model_notice(&engine);
    let result = job.run_document(&document, |p| {
        if let Some(notice) = base_notice.take() {
            let _ = writeln!(stderr, "notice: {notice}");
        }
        let _ = write!(stderr, "\r{}", progress_line(p));
        let _ = stderr.flush();
        drew = true;
    });
    if drew {
        eprintln!();
    }
    let done = result?;
    if args.json {
        let throughput = (!done.from_store && done.seconds > 0.0)
            .then(|| done.input_tokens as f64 / done.seconds);
        let out = serde_json::json!({
            "summary": done.summary,
            "path": done.document.path,
            "sha256": done.document.key.sha256,
            "byteCount": done.document.byte_count,
            "format": done.format,
            "encoding": done.encoding,
            "context": args.model.context,
            "summaryTokens": args.summary_tokens,
            "chunks": done.chunks,
            "pagesRead": done.pages_read,
            "levels": done.levels,
            "inputTokens": done.input_tokens,
            "reused": done.reused,
            "fromStore": done.from_store,
            "seconds": done.seconds,
            "inputTokensPerSecond": throughput,
            // the summaries' decode steps (none when every summary came from the store)
            "decodeTokens": done.decode.tokens,
            "decodeTokensPerSecond": done.decode.tokens_per_second(),
            "speculation": args.speculation.speculate.as_str(),
            "draftTokens": done.decode.draft_tokens,
            "acceptedDraftTokens": done.decode.accepted_draft_tokens,
            "peakRssBytes": super::peak_rss_bytes(),
            "chunkSummaries": store.chunk_summaries(done.document.id)?,
        });
        outln!("{out}")?;
    } else {
        if done.from_store {
            eprintln!("notice: already summarized; shown from the database (--force to redo)");
        }
        outln!("{}", done.summary)?;
    }
    Ok(())
}

/// `[#########---------------]  7/21 steps  chunks  0:42 elapsed  ~1:10 left` (a step: a
/// page read as a picture, or a summary)
fn progress_line(p: &JobProgress) -> String {
    let filled = (p.done * BAR_WIDTH)
        .checked_div(p.total)
        .unwrap_or(0)
        .min(BAR_WIDTH);
    let stage = if p.reading_pages {
        "reading pages".to_string()
    } else if p.level == 0 {
        "chunks".to_string()
    } else {
        format!("combining (level {})", p.level)
    };
    let left = match (p.paused, p.remaining_seconds) {
        (true, _) => "  paused: the device is hot".to_string(),
        (false, Some(s)) => format!("  ~{} left", clock(s)),
        (false, None) => String::new(),
    };
    format!(
        "[{}{}] {:>3}/{} steps  {stage}  {} elapsed{left}   ",
        "#".repeat(filled),
        "-".repeat(BAR_WIDTH - filled),
        p.done,
        p.total,
        clock(p.elapsed_seconds),
    )
}

fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_shows_the_bar_counts_and_times() {
        let p = JobProgress {
            level: 0,
            done: 6,
            total: 12,
            reused: 0,
            elapsed_seconds: 42.4,
            remaining_seconds: Some(3725.0),
            paused: false,
            reading_pages: false,
        };
        let line = progress_line(&p);
        assert!(
            line.starts_with(
                "[############------------]   6/12 steps  chunks  0:42 elapsed  ~1:02:05 left"
            ),
            "{line}"
        );
        let paused = progress_line(&JobProgress {
            paused: true,
            level: 2,
            ..p
        });
        assert!(
            paused.contains("combining (level 2)") && paused.contains("paused"),
            "{paused}"
        );
        let pages = progress_line(&JobProgress {
            reading_pages: true,
            done: 1,
            total: 3,
            ..p
        });
        assert!(pages.contains("1/3 steps  reading pages"), "{pages}");
    }
}
