//! `list_folder` and `find_files`: what is in the granted folders, by name. Neither reads a
//! file's contents, so neither spends the turn's reading budget.

use std::ops::ControlFlow;

use serde_json::{Value, json};

use super::{arg_str, human_bytes, query_words};
use crate::error::Result;
use crate::sandbox::walk::walk;
use crate::sandbox::{GrantMode, Location, is_hidden};
use crate::tool::ToolOutput;
use crate::toolbox::{Toolbox, with_notices};

pub(crate) fn list_folder(toolbox: &Toolbox<'_>, args: &Value) -> Result<ToolOutput> {
    let path = arg_str(args, "path").trim();
    let sandbox = toolbox.sandbox;
    if sandbox.is_empty() {
        return Err(crate::Error::NoGrant);
    }
    if path.is_empty() || path == "." || path == "/" {
        return Ok(list_grants(toolbox));
    }
    let location = sandbox.locate(path)?;
    let dir = sandbox.open_dir(&location)?;
    let entries = dir
        .entries()
        .map_err(|e| crate::sandbox::io_error(e, location.shown(), "list"))?;
    struct Item {
        /// Folders first, then names case-insensitively.
        key: (bool, String, String),
        kind: &'static str,
        bytes: Option<u64>,
    }
    let mut items: Vec<Item> = Vec::new();
    let mut non_utf8 = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if is_hidden(&name) || sandbox.is_private(location.grant, &location.rel.join(&name)) {
            continue;
        }
        let Some(name) = name.to_str().map(str::to_string) else {
            non_utf8 += 1;
            continue;
        };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let (kind, bytes) = if file_type.is_dir() {
            ("folder", None)
        } else if file_type.is_symlink() {
            ("link", None)
        } else if file_type.is_file() {
            ("file", entry.metadata().ok().map(|m| m.len()))
        } else {
            ("other", None)
        };
        items.push(Item {
            key: (kind != "folder", name.to_lowercase(), name),
            kind,
            bytes,
        });
    }
    items.sort_by(|a, b| a.key.cmp(&b.key));
    let total = items.len();
    let max = toolbox.limits.list_max_entries;
    let truncated = total > max;
    let folders = items.iter().filter(|i| i.kind == "folder").count();
    let mut text = format!(
        "{}: {folders} folders, {} files",
        location.shown(),
        total - folders
    );
    let mut listed = Vec::new();
    for item in items.iter().take(max) {
        let name = &item.key.2;
        text.push('\n');
        match (item.kind, item.bytes) {
            ("folder", _) => text.push_str(&format!("{name}/")),
            ("file", Some(n)) => text.push_str(&format!("{name}  ({})", human_bytes(n))),
            (kind, _) => text.push_str(&format!("{name}  ({kind})")),
        }
        listed.push(json!({"name": name, "kind": item.kind, "bytes": item.bytes}));
    }
    let mut notices = Vec::new();
    if truncated {
        notices.push(format!(
            "cut: showing {max} of {total} entries; use find_files to look for a name"
        ));
    }
    if non_utf8 > 0 {
        notices.push(format!(
            "{non_utf8} names that are not valid UTF-8 are not shown"
        ));
    }
    for n in &notices {
        text.push_str(&format!("\n[{n}]"));
    }
    let data = with_notices(
        json!({"path": location.shown(), "entries": listed, "total": total}),
        &notices,
    );
    Ok(ToolOutput::new(text, data, truncated))
}

fn list_grants(toolbox: &Toolbox<'_>) -> ToolOutput {
    let grants = toolbox.sandbox.grants();
    let mut text = String::from("Granted folders (paths start with their names):");
    for g in &grants {
        let mode = match g.mode {
            GrantMode::ReadOnly => "read only",
            GrantMode::MayWrite => "may write",
        };
        text.push_str(&format!("\n{}/  ({mode}; {})", g.name, g.path.display()));
    }
    ToolOutput::new(text, json!({"grants": grants}), false)
}

pub(crate) fn find_files(toolbox: &Toolbox<'_>, args: &Value) -> Result<ToolOutput> {
    let query = arg_str(args, "query");
    let words = query_words(query);
    if words.is_empty() {
        return Err(crate::Error::invalid(
            "find_files",
            "argument `query` has no letters or digits to look for",
        ));
    }
    let start = start_folder(toolbox, args)?;
    let max = toolbox.limits.find_max_results;
    let mut found: Vec<Value> = Vec::new();
    let mut text_lines: Vec<String> = Vec::new();
    let mut more = false;
    let stats = walk(
        toolbox.sandbox,
        start.as_ref(),
        &toolbox.limits,
        &mut |entry| {
            let name = entry.name.to_lowercase();
            if words.iter().all(|w| name.contains(w.as_str())) {
                if found.len() == max {
                    more = true;
                    return ControlFlow::Break(());
                }
                let shown = entry.shown(toolbox.sandbox);
                text_lines.push(if entry.is_dir {
                    format!("{shown}/")
                } else {
                    format!("{shown}  ({})", human_bytes(entry.len))
                });
                found.push(json!({
                    "path": shown,
                    "kind": if entry.is_dir { "folder" } else { "file" },
                    "bytes": (!entry.is_dir).then_some(entry.len),
                }));
            }
            ControlFlow::Continue(())
        },
    )?;
    let mut notices = stats.notices(&toolbox.limits);
    if more {
        notices.insert(
            0,
            format!("cut: showing the first {max} matches; use more words"),
        );
    }
    let truncated = more || stats.hit_entry_cap;
    let mut text = if found.is_empty() {
        format!("No file or folder name contains every word of \"{query}\".")
    } else {
        format!(
            "{} names contain every word of \"{query}\":\n{}",
            found.len(),
            text_lines.join("\n")
        )
    };
    for n in &notices {
        text.push_str(&format!("\n[{n}]"));
    }
    let data = with_notices(json!({"query": query, "matches": found}), &notices);
    Ok(ToolOutput::new(text, data, truncated))
}

/// The folder a search is limited to, if the call names one.
pub(crate) fn start_folder(toolbox: &Toolbox<'_>, args: &Value) -> Result<Option<Location>> {
    let path = arg_str(args, "path").trim();
    if toolbox.sandbox.is_empty() {
        return Err(crate::Error::NoGrant);
    }
    if path.is_empty() || path == "." || path == "/" {
        return Ok(None);
    }
    let location = toolbox.sandbox.locate(path)?;
    // a file is refused here, not halfway through the walk
    toolbox.sandbox.open_dir(&location)?;
    Ok(Some(location))
}
