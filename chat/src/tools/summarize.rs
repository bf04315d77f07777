//! [`JobSummarizer`]: summarize_file on the resumable map-reduce document job
//! ([`crate::DocumentJob`]); the job's progress is the tool's. The document is opened by path
//! (the `documents` API is path-based), so the file is checked to still be the one the
//! sandbox opened — same device and inode, reached without a symlink — before the job and
//! again before its summary is handed back.

use std::sync::atomic::AtomicBool;

use agent::{FileSummarizer, FileSummary, FileToSummarize, HostError, ToolProgress};
use engine::EngineHandle;
use memory::Store;

use crate::documents::{DocumentJob, DocumentParams, JobProgress};

pub struct JobSummarizer<'a> {
    pub engine: &'a EngineHandle,
    pub store: &'a Store,
    pub params: DocumentParams,
    pub cancel: &'a AtomicBool,
}

fn changed(file: &FileToSummarize) -> HostError {
    HostError::new(
        "changed_while_opening",
        format!(
            "{} changed while it was being opened; try again",
            file.shown
        ),
    )
}

/// The tool's view of the job's progress.
pub fn tool_progress(p: &JobProgress) -> ToolProgress {
    let message = if p.paused {
        "paused: the device is hot".to_string()
    } else if p.level == 0 {
        "summarizing the document's parts".to_string()
    } else {
        format!("combining summaries (level {})", p.level)
    };
    ToolProgress {
        tool: "summarize_file".into(),
        done: p.done as u64,
        total: Some(p.total as u64),
        message,
        remaining_seconds: p.remaining_seconds,
    }
}

impl FileSummarizer for JobSummarizer<'_> {
    fn summarize(
        &self,
        file: &FileToSummarize,
        progress: &mut dyn FnMut(ToolProgress),
    ) -> Result<FileSummary, HostError> {
        if !file.still_the_same() {
            return Err(changed(file));
        }
        let job = DocumentJob {
            engine: self.engine,
            store: self.store,
            params: self.params.clone(),
            cancel: self.cancel,
        };
        let done = job
            .run(&file.path, |p| progress(tool_progress(p)))
            .map_err(|e| HostError::new(e.code(), e.to_string()))?;
        if !file.still_the_same() {
            return Err(changed(file));
        }
        Ok(FileSummary {
            summary: done.summary,
            chunks: done.chunks,
            from_store: done.from_store,
        })
    }
}
