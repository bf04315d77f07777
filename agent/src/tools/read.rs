//! `read_file` and `summarize_file`: the text of one file, a window at a time, or its summary
//! by the model. Both open the file through the sandbox and refuse what is not text before
//! doing anything costly; both count what they read against the turn's budget.

use serde_json::{Value, json};

use super::{arg_str, human_bytes};
use crate::error::{Error, Result};
use crate::host::FileToSummarize;
use crate::schema::as_integer;
use crate::text::window::read_window;
use crate::text::{Kind, read_head};
use crate::tool::{ToolOutput, ToolProgress};
use crate::toolbox::{CallContext, Toolbox};

pub(crate) fn read_file(
    toolbox: &Toolbox<'_>,
    args: &Value,
    cx: &mut CallContext<'_>,
) -> Result<ToolOutput> {
    let limits = &toolbox.limits;
    let offset = as_integer(args.get("offset")).unwrap_or(0).max(0) as u64;
    let length = as_integer(args.get("length"))
        .map(|n| n.clamp(1, limits.read_max_bytes as i64) as usize)
        .unwrap_or(limits.read_default_bytes);
    let location = toolbox.sandbox.locate(arg_str(args, "path"))?;
    let (file, meta) = toolbox.sandbox.open_file(&location)?;
    if cx.budget.is_spent() {
        return Err(Error::TurnBudgetSpent {
            limit_mb: cx.budget.limit() >> 20,
        });
    }
    let shown = location.shown().to_string();
    let name = location
        .relative()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut file = file.into_std();
    let window = read_window(&mut file, meta.len(), &name, &shown, offset, length);
    let window = match window {
        Ok(w) => w,
        Err(e) => {
            // what was read to refuse it still counts
            cx.budget
                .spend(meta.len().min(crate::text::HEAD_BYTES as u64));
            return Err(e);
        }
    };
    cx.budget.spend(window.bytes_read);
    let unit = match window.kind {
        Kind::Text => "bytes",
        Kind::Html | Kind::Pdf => "bytes of its text",
    };
    let mut text = format!(
        "{shown} ({}, {}), {unit} {} to {}:\n{}",
        window.kind.name(),
        human_bytes(meta.len()),
        window.start,
        window.next.unwrap_or(window.total),
        window.text.trim_end_matches('\n')
    );
    match window.next {
        Some(next) => text.push_str(&format!(
            "\n[more: {} {unit} in all; read_file with offset {next} continues]",
            window.total
        )),
        None => text.push_str("\n[end of file]"),
    }
    let data = json!({
        "path": shown,
        "format": window.kind.name(),
        "offset": window.start,
        "nextOffset": window.next,
        "total": window.total,
        "fileBytes": meta.len(),
        "bytesRead": window.bytes_read,
        "text": window.text,
    });
    Ok(ToolOutput::new(text, data, window.next.is_some()))
}

pub(crate) fn summarize_file(
    toolbox: &Toolbox<'_>,
    args: &Value,
    cx: &mut CallContext<'_>,
) -> Result<ToolOutput> {
    let location = toolbox.sandbox.locate(arg_str(args, "path"))?;
    let (file, meta) = toolbox.sandbox.open_file(&location)?;
    let shown = location.shown().to_string();
    // a binary file is refused before the model is asked for (and perhaps loaded)
    let name = location
        .relative()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut file = file.into_std();
    read_head(&mut file, &name, &shown)?;
    let identity = file.metadata().map_err(|e| Error::Io {
        action: "read",
        path: shown.clone(),
        source: e,
    })?;
    let Some(summarizer) = toolbox.summarizer else {
        return Err(Error::SummarizerUnavailable);
    };
    if meta.len() > cx.budget.remaining() {
        return Err(Error::TurnBudgetSpent {
            limit_mb: cx.budget.limit() >> 20,
        });
    }
    let request = FileToSummarize {
        path: toolbox.sandbox.absolute(&location),
        shown: shown.clone(),
        byte_count: meta.len(),
        identity: crate::host::FileIdentity::of(&identity),
    };
    drop(file);
    cx.budget.spend(meta.len());
    let progress = &mut *cx.progress;
    let summary = summarizer.summarize(&request, &mut |p: ToolProgress| progress(p))?;
    let text = format!(
        "Summary of {shown} ({}, {} chunk{}{}):\n{}",
        human_bytes(meta.len()),
        summary.chunks,
        if summary.chunks == 1 { "" } else { "s" },
        if summary.from_store {
            ", summarized before"
        } else {
            ""
        },
        summary.summary
    );
    let data = json!({
        "path": shown,
        "summary": summary.summary,
        "chunks": summary.chunks,
        "fromStore": summary.from_store,
        "fileBytes": meta.len(),
    });
    Ok(ToolOutput::new(text, data, false))
}
