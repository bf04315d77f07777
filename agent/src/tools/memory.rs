//! The tools over the app's database, through the [`crate::ToolHost`]: searching earlier
//! conversations, notes (add, list, search) and reminders (create, list). add_note and
//! create_reminder write, so the toolbox asks first; a reminder's `when` is understood (and a
//! time that has passed refused) before the user is asked, so the dialog shows the time.

use serde_json::{Value, json};

use super::{arg_str, preview};
use crate::clock;
use crate::error::{Error, Result};
use crate::tool::ToolOutput;
use crate::toolbox::{CallContext, Toolbox};

const CONVERSATION_HITS: usize = 10;
const NOTES_LISTED: usize = 20;
const NOTE_HITS: usize = 10;
const REMINDERS_LISTED: usize = 50;
/// Characters of a note shown in a list.
const NOTE_PREVIEW_CHARS: usize = 120;

pub(crate) fn search_conversations(toolbox: &Toolbox<'_>, args: &Value) -> Result<ToolOutput> {
    let query = arg_str(args, "query");
    let hits = toolbox
        .host
        .search_conversations(query, CONVERSATION_HITS)?;
    let mut text = if hits.is_empty() {
        format!("No earlier conversation matches \"{query}\".")
    } else {
        format!(
            "{} places in earlier conversations match \"{query}\":",
            hits.len()
        )
    };
    for h in &hits {
        let who = h.role.as_deref().unwrap_or("title");
        text.push_str(&format!("\n- \"{}\" ({who}): {}", h.title, h.snippet));
    }
    let truncated = hits.len() == CONVERSATION_HITS;
    if truncated {
        text.push_str(&format!("\n[showing the best {CONVERSATION_HITS}]"));
    }
    Ok(ToolOutput::new(
        text,
        json!({"query": query, "matches": hits}),
        truncated,
    ))
}

pub(crate) fn describe_note(args: &Value) -> String {
    let text = arg_str(args, "text");
    format!(
        "save a note titled \"{}\" ({} characters)",
        arg_str(args, "title").trim(),
        text.chars().count()
    )
}

pub(crate) fn add_note(
    toolbox: &Toolbox<'_>,
    args: &Value,
    cx: &mut CallContext<'_>,
) -> Result<ToolOutput> {
    let note = toolbox.host.add_note(
        &cx.conversation,
        arg_str(args, "title"),
        arg_str(args, "text"),
    )?;
    Ok(ToolOutput::new(
        format!("Saved note #{} \"{}\".", note.id, note.title),
        json!({"note": note}),
        false,
    ))
}

pub(crate) fn list_notes(toolbox: &Toolbox<'_>) -> Result<ToolOutput> {
    let (notes, total) = toolbox.host.list_notes(NOTES_LISTED)?;
    let mut text = if notes.is_empty() {
        "There are no notes.".to_string()
    } else {
        format!("{total} notes, newest first:")
    };
    for n in &notes {
        text.push_str(&format!(
            "\n- #{} \"{}\": {}",
            n.id,
            n.title,
            preview(&n.text, NOTE_PREVIEW_CHARS)
        ));
    }
    let truncated = total > notes.len();
    if truncated {
        text.push_str(&format!(
            "\n[showing the newest {}; search_notes finds the others]",
            notes.len()
        ));
    }
    Ok(ToolOutput::new(
        text,
        json!({"notes": notes, "total": total}),
        truncated,
    ))
}

pub(crate) fn search_notes(toolbox: &Toolbox<'_>, args: &Value) -> Result<ToolOutput> {
    let query = arg_str(args, "query");
    let hits = toolbox.host.search_notes(query, NOTE_HITS)?;
    let mut text = if hits.is_empty() {
        format!("No note matches \"{query}\".")
    } else {
        format!("{} notes match \"{query}\":", hits.len())
    };
    for h in &hits {
        text.push_str(&format!(
            "\n- #{} \"{}\": {}",
            h.note.id, h.note.title, h.snippet
        ));
    }
    let truncated = hits.len() == NOTE_HITS;
    Ok(ToolOutput::new(
        text,
        json!({"query": query, "matches": hits}),
        truncated,
    ))
}

fn due(args: &Value) -> Result<jiff::ZonedDateTime> {
    let when = arg_str(args, "when");
    clock::parse_when(when, &clock::local_now()).map_err(|problem| Error::InvalidTime {
        when: when.to_string(),
        problem,
    })
}

pub(crate) fn describe_reminder(args: &Value) -> Result<String> {
    let due = due(args)?;
    Ok(format!(
        "set a reminder \"{}\" for {}",
        arg_str(args, "text").trim(),
        clock::describe(&due)
    ))
}

pub(crate) fn create_reminder(
    toolbox: &Toolbox<'_>,
    args: &Value,
    cx: &mut CallContext<'_>,
) -> Result<ToolOutput> {
    let due = due(args)?;
    let reminder = toolbox.host.create_reminder(
        &cx.conversation,
        arg_str(args, "text"),
        due.timestamp().as_millisecond(),
    )?;
    Ok(ToolOutput::new(
        format!(
            "Reminder #{} set for {}: {}",
            reminder.id,
            clock::describe(&due),
            reminder.text
        ),
        json!({"reminder": reminder, "due": due.to_string()}),
        false,
    ))
}

pub(crate) fn list_reminders(toolbox: &Toolbox<'_>, args: &Value) -> Result<ToolOutput> {
    let include_done = args
        .get("include_done")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let reminders = toolbox
        .host
        .list_reminders(include_done, REMINDERS_LISTED)?;
    let tz = clock::local_now().time_zone().clone();
    let mut text = if reminders.is_empty() {
        "There are no reminders.".to_string()
    } else {
        format!("{} reminders, soonest first:", reminders.len())
    };
    for r in &reminders {
        let when = jiff::Timestamp::from_millisecond(r.due_at)
            .map(|t| clock::describe(&t.to_zoned_datetime(tz.clone())))
            .unwrap_or_else(|_| r.due_at.to_string());
        let done = if r.done { " (done)" } else { "" };
        text.push_str(&format!("\n- #{} {when}{done}: {}", r.id, r.text));
    }
    let truncated = reminders.len() == REMINDERS_LISTED;
    Ok(ToolOutput::new(
        text,
        json!({"reminders": reminders}),
        truncated,
    ))
}
