//! `search_files`: which files contain every word of a query. A file matches when each word
//! occurs in it somewhere (case-insensitive, as a substring, so a Chinese or Japanese word
//! matches inside a sentence); up to a few of its lines with a match are shown, with their
//! numbers and a snippet around the first word found. Files are streamed line by line (see
//! `text::scan`), binary files skipped, and the search stops at the caps — entries looked at,
//! bytes read by this search, bytes read in this turn, files reported — saying which.

use std::ops::ControlFlow;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::OpenOptions;
use serde_json::{Value, json};

use super::files::start_folder;
use super::{arg_str, human_bytes, preview, query_words};
use crate::error::Result;
use crate::sandbox::walk::walk;
use crate::text::scan::scan_lines;
use crate::tool::ToolOutput;
use crate::toolbox::{CallContext, Toolbox, with_notices};

/// Characters of a line shown before the first match, and in all.
const SNIPPET_BEFORE: usize = 40;
const SNIPPET_CHARS: usize = 160;

struct FileHit {
    shown: String,
    lines: Vec<(u64, String)>,
}

pub(crate) fn search_files(
    toolbox: &Toolbox<'_>,
    args: &Value,
    cx: &mut CallContext<'_>,
) -> Result<ToolOutput> {
    let query = arg_str(args, "query");
    let words = query_words(query);
    if words.is_empty() {
        return Err(crate::Error::invalid(
            "search_files",
            "argument `query` has no letters or digits to look for",
        ));
    }
    let start = start_folder(toolbox, args)?;
    let limits = &toolbox.limits;
    if cx.budget.is_spent() {
        return Err(crate::Error::TurnBudgetSpent {
            limit_mb: cx.budget.limit() >> 20,
        });
    }
    let mut hits: Vec<FileHit> = Vec::new();
    let mut read: u64 = 0;
    let (mut binary, mut too_large, mut unreadable) = (0usize, 0usize, 0usize);
    let (mut search_cap, mut turn_cap, mut more_files) = (false, false, false);
    let mut files = 0usize;
    let stats = walk(toolbox.sandbox, start.as_ref(), limits, &mut |entry| {
        if entry.is_dir {
            return ControlFlow::Continue(());
        }
        let allowed = (limits.search_max_bytes.saturating_sub(read)).min(cx.budget.remaining());
        if allowed == 0 {
            if cx.budget.is_spent() {
                turn_cap = true;
            } else {
                search_cap = true;
            }
            return ControlFlow::Break(());
        }
        files += 1;
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        let Ok(file) = entry.parent.open_with(entry.name, &options) else {
            unreadable += 1;
            return ControlFlow::Continue(());
        };
        let mut file = file.into_std();
        let shown = entry.shown(toolbox.sandbox);
        let mut seen = vec![false; words.len()];
        let mut lines: Vec<(u64, String)> = Vec::new();
        let scanned = scan_lines(
            &mut file,
            entry.len,
            entry.name,
            &shown,
            allowed,
            limits.line_max_bytes,
            &mut |number, line| {
                let lower = line.to_lowercase();
                let mut first: Option<usize> = None;
                for (i, w) in words.iter().enumerate() {
                    if let Some(at) = lower.find(w.as_str()) {
                        seen[i] = true;
                        first = Some(first.map_or(at, |f| f.min(at)));
                    }
                }
                if let Some(at) = first
                    && lines.len() < limits.search_lines_per_file
                {
                    lines.push((number, snippet(line, &lower, at)));
                }
                ControlFlow::Continue(())
            },
        );
        let scanned = match scanned {
            Ok(s) => s,
            Err(_) => {
                unreadable += 1;
                return ControlFlow::Continue(());
            }
        };
        read += scanned.bytes_read;
        cx.budget.spend(scanned.bytes_read);
        binary += scanned.binary as usize;
        too_large += scanned.too_large as usize;
        if seen.iter().all(|s| *s) {
            if hits.len() == limits.search_max_files {
                more_files = true;
                return ControlFlow::Break(());
            }
            hits.push(FileHit { shown, lines });
        }
        if scanned.cut {
            if cx.budget.is_spent() {
                turn_cap = true;
            } else {
                search_cap = true;
            }
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })?;

    let mut notices = Vec::new();
    if more_files {
        notices.push(format!(
            "cut: more than {} files match; use more words or name a folder",
            limits.search_max_files
        ));
    }
    if search_cap {
        notices.push(format!(
            "cut: stopped after reading {} (the most one search reads); name a folder to search in",
            human_bytes(limits.search_max_bytes)
        ));
    }
    if turn_cap {
        notices.push(format!(
            "cut: this turn has read {} of files, all it may",
            human_bytes(cx.budget.limit())
        ));
    }
    notices.extend(stats.notices(limits));
    if binary > 0 {
        notices.push(format!("{binary} files that are not text were skipped"));
    }
    if too_large > 0 {
        notices.push(format!(
            "{too_large} HTML or PDF files too large to read in this search were skipped"
        ));
    }
    if unreadable > 0 {
        notices.push(format!("{unreadable} files could not be read"));
    }
    let truncated = more_files || search_cap || turn_cap || stats.hit_entry_cap;
    let mut text = if hits.is_empty() {
        format!("No file contains every word of \"{query}\" ({files} files searched).")
    } else {
        format!(
            "{} files contain every word of \"{query}\" ({files} files searched):",
            hits.len()
        )
    };
    for hit in &hits {
        text.push_str(&format!("\n{}", hit.shown));
        for (n, line) in &hit.lines {
            text.push_str(&format!("\n  {n}: {line}"));
        }
    }
    for n in &notices {
        text.push_str(&format!("\n[{n}]"));
    }
    let data = json!({
        "query": query,
        "filesSearched": files,
        "bytesRead": read,
        "matches": hits.iter().map(|h| json!({
            "path": h.shown,
            "lines": h.lines.iter().map(|(n, s)| json!({"line": n, "snippet": s})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    Ok(ToolOutput::new(
        text,
        with_notices(data, &notices),
        truncated,
    ))
}

/// A piece of `line` around the match at byte `at` of its lowercase form.
fn snippet(line: &str, lower: &str, at: usize) -> String {
    // lowercasing can change byte lengths; find the character position through the lowercase
    let char_at = lower[..at.min(lower.len())].chars().count();
    let start = char_at.saturating_sub(SNIPPET_BEFORE);
    let piece: String = line.chars().skip(start).collect();
    let mut out = preview(&piece, SNIPPET_CHARS);
    if start > 0 {
        out.insert(0, '…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_start_a_little_before_the_match() {
        let line = format!("{} tomato soup", "x".repeat(100));
        let lower = line.to_lowercase();
        let s = snippet(&line, &lower, lower.find("tomato").unwrap());
        assert!(s.starts_with('…'));
        assert!(s.contains("tomato soup"));
        assert_eq!(snippet("Tomato", "tomato", 0), "Tomato");
    }
}
