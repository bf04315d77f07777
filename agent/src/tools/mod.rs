//! The tools: their declarations (name, description, argument schema, whether they write)
//! and their implementations, one area per file — `files.rs` (list_folder, find_files),
//! `search.rs` (search_files), `read.rs` (read_file, summarize_file), `memory.rs`
//! (conversations, notes, reminders), `utility.rs` (now, calculate). Each takes validated
//! arguments and returns a [`ToolOutput`] whose text is plain data for the model.

mod files;
mod memory;
mod read;
mod search;
mod utility;

use serde_json::{Value, json};
use std::borrow::Cow;

use crate::error::Result;
use crate::limits::Limits;
use crate::sandbox::MAX_PATH_BYTES;
use crate::tool::{Tool, ToolOutput};
use crate::toolbox::{CallContext, Toolbox};

/// Longest query a search takes, in characters.
pub const MAX_QUERY_CHARS: u64 = 200;

fn string(description: &str, min: u64, max: u64) -> Value {
    json!({"type": "string", "description": description, "minLength": min, "maxLength": max})
}

fn path_argument(description: &str) -> Value {
    string(description, 0, MAX_PATH_BYTES as u64)
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// Every tool, in the order they are offered to the model.
pub fn declarations(limits: &Limits) -> Vec<Tool> {
    let query = || {
        string(
            "words to look for; all of them must match (case does not matter)",
            1,
            MAX_QUERY_CHARS,
        )
    };
    vec![
        Tool {
            name: Cow::Borrowed("list_folder"),
            description: Cow::Borrowed(
                "List the files and folders in a granted folder; with no path, list the granted folders.",
            ),
            parameters: object(
                json!({"path": path_argument("a folder: a granted folder's name, optionally followed by /subfolder")}),
                &[],
            ),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("find_files"),
            description: Cow::Borrowed(
                "Find files and folders whose names contain every word of the query, in the granted folders.",
            ),
            parameters: object(
                json!({"query": query(), "path": path_argument("only look inside this folder")}),
                &["query"],
            ),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("search_files"),
            description: Cow::Borrowed(
                "Search the text of files in the granted folders for every word of the query; gives file, line and snippet.",
            ),
            parameters: object(
                json!({"query": query(), "path": path_argument("only search inside this folder")}),
                &["query"],
            ),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("read_file"),
            description: Cow::Borrowed(
                "Read the text of a file (.txt, .md, .html, .pdf or other plain text), a piece at a time.",
            ),
            parameters: object(
                json!({
                    "path": path_argument("the file, e.g. docs/notes.txt"),
                    "offset": {"type": "integer", "minimum": 0, "description": "where to continue: the next offset a previous read gave (0: the start)"},
                    "length": {"type": "integer", "minimum": 1, "maximum": limits.read_max_bytes, "description": "how many bytes of text to read at most", "default": limits.read_default_bytes}
                }),
                &["path"],
            ),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("summarize_file"),
            description: Cow::Borrowed(
                "Summarize a whole file of any length with the model (slow for long files; progress is shown).",
            ),
            parameters: object(
                json!({"path": path_argument("the file, e.g. docs/report.pdf")}),
                &["path"],
            ),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("search_conversations"),
            description: Cow::Borrowed(
                "Search earlier conversations with the user for every word of the query.",
            ),
            parameters: object(json!({"query": query()}), &["query"]),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("add_note"),
            description: Cow::Borrowed(
                "Save a note with a title and a text (asks the user first).",
            ),
            parameters: object(
                json!({
                    "title": string("a short title", 1, 200),
                    "text": string("the note", 1, 20_000)
                }),
                &["title", "text"],
            ),
            writes: true,
        },
        Tool {
            name: Cow::Borrowed("list_notes"),
            description: Cow::Borrowed("List the saved notes, newest first."),
            parameters: object(json!({}), &[]),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("search_notes"),
            description: Cow::Borrowed("Search the saved notes for every word of the query."),
            parameters: object(json!({"query": query()}), &["query"]),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("create_reminder"),
            description: Cow::Borrowed(
                "Set a reminder shown when it is due (asks the user first).",
            ),
            parameters: object(
                json!({
                    "text": string("what to remind the user of", 1, 500),
                    "when": string("when: \"2026-05-04 09:00\", \"tomorrow 9:00\", \"in 2 hours\", or RFC 3339", 1, 100)
                }),
                &["text", "when"],
            ),
            writes: true,
        },
        Tool {
            name: Cow::Borrowed("list_reminders"),
            description: Cow::Borrowed("List the reminders that are not done, soonest first."),
            parameters: object(
                json!({"include_done": {"type": "boolean", "description": "also list those marked done"}}),
                &[],
            ),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("now"),
            description: Cow::Borrowed("The current local date, time, weekday and time zone."),
            parameters: object(json!({}), &[]),
            writes: false,
        },
        Tool {
            name: Cow::Borrowed("calculate"),
            description: Cow::Borrowed(
                "Compute an arithmetic expression: + - * / % ^, parentheses, sqrt, round, min, max, pi ….",
            ),
            parameters: object(
                json!({"expression": string("e.g. (12.5 * 4) / 3", 1, crate::calc::MAX_EXPRESSION_CHARS as u64)}),
                &["expression"],
            ),
            writes: false,
        },
    ]
}

/// Run the tool `name` (already validated).
pub(crate) fn run(
    toolbox: &Toolbox<'_>,
    name: &str,
    args: &Value,
    cx: &mut CallContext<'_>,
) -> Result<ToolOutput> {
    match name {
        "list_folder" => files::list_folder(toolbox, args),
        "find_files" => files::find_files(toolbox, args),
        "search_files" => search::search_files(toolbox, args, cx),
        "read_file" => read::read_file(toolbox, args, cx),
        "summarize_file" => read::summarize_file(toolbox, args, cx),
        "search_conversations" => memory::search_conversations(toolbox, args),
        "add_note" => memory::add_note(toolbox, args, cx),
        "list_notes" => memory::list_notes(toolbox),
        "search_notes" => memory::search_notes(toolbox, args),
        "create_reminder" => memory::create_reminder(toolbox, args, cx),
        "list_reminders" => memory::list_reminders(toolbox, args),
        "now" => utility::now(),
        "calculate" => utility::calculate(args),
        other => Err(crate::Error::UnknownTool(other.to_string())),
    }
}

/// What a write tool will do, in a sentence for the approval dialog; `Err` when the
/// arguments cannot work (a time that has passed): refused before anyone is asked.
pub(crate) fn describe_write(name: &str, args: &Value) -> Result<String> {
    match name {
        "add_note" => Ok(memory::describe_note(args)),
        "create_reminder" => memory::describe_reminder(args),
        other => Ok(format!("run {other}")),
    }
}

/// A string argument (validated as present when required).
pub(crate) fn arg_str<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Text cut to `max` characters with an ellipsis, on one line.
pub(crate) fn preview(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        flat.to_string()
    } else {
        let mut out: String = flat.chars().take(max).collect();
        out.push('…');
        out
    }
}

/// `1.2 KB`, `3.4 MB`: sizes as people read them.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Words of a query, lowercased, without the punctuation around them.
pub(crate) fn query_words(query: &str) -> Vec<String> {
    query
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_stays_inside_the_checked_subset() {
        for tool in declarations(&Limits::default()) {
            crate::schema::check_subset(&tool.parameters)
                .unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            assert!(!tool.description.contains('\n'), "{}: one line", tool.name);
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(human_bytes(999), "999 bytes");
        assert_eq!(human_bytes(1_234_567), "1.2 MB");
        assert_eq!(preview("a\nb  ", 10), "a b");
        assert_eq!(preview("abcdef", 3), "abc…");
        assert_eq!(
            query_words("  Tomato, BASIL! 天气 "),
            vec!["tomato", "basil", "天气"]
        );
    }
}
