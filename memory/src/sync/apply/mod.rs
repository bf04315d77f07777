//! Applying another device's records, inside the transaction of the file they came in (with
//! `sync_state.applying` set, so the schema's triggers do not stamp them as this device's own
//! changes). Each record merges into the row field by field, the later stamp winning, so the
//! result is the same in any order and any number of times:
//!
//! - conversations, notes and reminders: every field a last-writer-wins register; a deletion
//!   is a tombstone that beats the fields stamped before it (they go back to their defaults)
//!   and loses to those stamped after (then the row stays, or comes back, with them); a row is
//!   deleted when no field is newer than its tombstone;
//! - messages, summaries, tool calls: created once, identified by uid, so never duplicated; a
//!   message's pictures come with its creation (their files written, checked, before its row
//!   names them); its body (a reply stopped or edited) is a register; their deletion is final — a
//!   later edit of a deleted message is kept out, not resurrected. A conversation's deletion
//!   takes the messages made before it with it; a summary goes when its first or last
//!   message goes;
//! - a row that a deletion lost to (a change stamped after it) keeps an `updated_at` no
//!   earlier than the deletion, wherever it was deleted first;
//! - a record whose parent has not arrived (a message before its conversation; a summary
//!   before its messages) waits in `sync_pending` and is applied when the parent comes;
//! - messages are ordered by their creation stamp, so two devices that added to the same
//!   conversation at once end with the same order; `seq` is renumbered to match.

use std::collections::{HashMap, HashSet};

use rusqlite::{OptionalExtension, Transaction, params};

use super::clock::{MAX_HLC, Stamp, millis};
use super::export::stamps;
use super::folder::is_device_id;
use super::record::{Body, Kind, Picture, Record};
use crate::error::{Error, Result};
use crate::store::ImageFolder;
use crate::store::images::{self, from_base64};
use crate::types::{ConversationId, ImageRef, MessageId};

mod order;
pub(crate) use order::finish;

/// What became of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Applied,
    /// Nothing to do: already known, older than a deletion, or deleted.
    Ignored,
    /// Its parent (this uid) has not arrived yet.
    Waiting(String),
}

/// What applying a file leaves to do after its records.
#[derive(Default)]
pub(crate) struct Effects {
    /// Conversations whose messages may need renumbering.
    reorder: HashSet<String>,
    /// Conversations whose KV snapshot no longer matches their messages.
    stale_snapshots: HashSet<String>,
    /// Snapshot files to remove once the transaction is committed.
    pub files_to_remove: Vec<String>,
    pub applied: usize,
}

fn invalid(why: impl Into<String>) -> Error {
    Error::InvalidArgument(why.into())
}

/// Refuse what cannot be a record of ours before anything is written.
pub(crate) fn validate(record: &Record) -> Result<()> {
    for s in record.stamps() {
        if s.hlc >= MAX_HLC || !(is_device_id(&s.device) || (s.hlc == 0 && s.device.is_empty())) {
            return Err(invalid(format!("a record has an invalid stamp {s:?}")));
        }
    }
    let uid = record.uid();
    let ok_uid = match record.kind() {
        Kind::Conversation => ConversationId(uid.to_string()).is_valid(),
        _ => !uid.is_empty() && uid.len() <= 64 && uid.bytes().all(|b| b.is_ascii_alphanumeric()),
    };
    if !ok_uid {
        return Err(invalid(format!("a record has an invalid id `{uid}`")));
    }
    match record {
        Record::Message {
            role,
            body,
            conversation,
            images,
            ..
        } => {
            for p in images {
                picture_bytes(p)?;
            }
            if !["system", "user", "assistant"].contains(&role.as_str()) {
                return Err(invalid(format!("a message has an unknown role `{role}`")));
            }
            if !["complete", "stopped", "error"].contains(&body.value.status.as_str()) {
                return Err(invalid(format!(
                    "a message has an unknown status `{}`",
                    body.value.status
                )));
            }
            if !ConversationId(conversation.clone()).is_valid() {
                return Err(invalid("a message names an invalid conversation"));
            }
        }
        Record::Summary { conversation, .. }
            if !ConversationId(conversation.clone()).is_valid() =>
        {
            return Err(invalid("a summary names an invalid conversation"));
        }
        Record::ToolCall { outcome, .. }
            if !["ok", "error", "denied"].contains(&outcome.as_str()) =>
        {
            return Err(invalid(format!(
                "a tool call has an unknown outcome `{outcome}`"
            )));
        }
        _ => {}
    }
    Ok(())
}

/// A record's picture, decoded and checked against its sha256.
fn picture_bytes(p: &Picture) -> Result<Vec<u8>> {
    if p.data.is_empty() {
        return Err(invalid(format!(
            "a message's picture {}… came without its data",
            p.sha256.get(..12).unwrap_or(&p.sha256)
        )));
    }
    from_base64(&p.sha256, &p.mime, &p.data).map_err(|why| invalid(format!("a message's {why}")))
}

fn set_stamp(tx: &Transaction<'_>, kind: Kind, uid: &str, field: &str, s: &Stamp) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO sync_clocks (kind, uid, field, hlc, device) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![kind.as_str(), uid, field, s.hlc as i64, s.device])?;
    Ok(())
}

fn forget_stamps(tx: &Transaction<'_>, kind: Kind, uid: &str) -> Result<()> {
    tx.execute(
        "DELETE FROM sync_clocks WHERE kind = ?1 AND uid = ?2 AND field != '~'",
        params![kind.as_str(), uid],
    )?;
    Ok(())
}

/// Which of a last-writer-wins row's incoming fields to take.
struct Merge {
    /// The row has to be created.
    create: bool,
    /// Fields whose incoming value wins.
    take: HashSet<&'static str>,
}

impl Merge {
    /// Stamp the fields taken with their incoming stamps; on a row created after a deletion,
    /// the fields not taken (back to their defaults) with the deletion's stamp.
    fn record_stamps(
        &self,
        tx: &Transaction<'_>,
        kind: Kind,
        uid: &str,
        incoming: &[(&'static str, &Stamp)],
        tombstone: Option<&Stamp>,
    ) -> Result<()> {
        for (f, s) in incoming {
            if self.take.contains(f) {
                set_stamp(tx, kind, uid, f, s)?;
            } else if let Some(t) = tombstone.filter(|_| self.create) {
                set_stamp(tx, kind, uid, f, t)?;
            }
        }
        Ok(())
    }
}

/// `current`: the row's stamps (`None`: no row); `incoming`: the record's field stamps.
fn merge(
    current: Option<&HashMap<String, Stamp>>,
    tombstone: Option<&Stamp>,
    incoming: &[(&'static str, &Stamp)],
) -> Option<Merge> {
    let alive = |s: &Stamp| tombstone.is_none_or(|t| s > t);
    match current {
        Some(current) => Some(Merge {
            create: false,
            take: incoming
                .iter()
                .filter(|(f, s)| alive(s) && current.get(*f).is_none_or(|c| *s > c))
                .map(|(f, _)| *f)
                .collect(),
        }),
        None => incoming.iter().any(|(_, s)| alive(s)).then(|| Merge {
            create: true,
            take: incoming
                .iter()
                .filter(|(_, s)| alive(s))
                .map(|(f, _)| *f)
                .collect(),
        }),
    }
}

/// The `updated_at` of a row created again after a deletion stamped `tombstone`: no earlier
/// than the deletion. A device that kept the row (a change newer than the deletion had
/// arrived first) merged into it the times of changes the deletion then took, which a device
/// that deleted it first never sees again; those times are all before the deletion's stamp
/// (a stamp is never behind the wall clock of the change it follows), so both take the
/// deletion's time and agree. `delete` does the same where the row stays.
fn after_deletion(updated_at: i64, tombstone: Option<&Stamp>) -> i64 {
    tombstone.map_or(updated_at, |t| updated_at.max(millis(t.hlc)))
}

fn conversation_exists(tx: &Transaction<'_>, uid: &str) -> Result<bool> {
    Ok(tx
        .query_row("SELECT 1 FROM conversations WHERE id = ?1", [uid], |_| {
            Ok(())
        })
        .optional()?
        .is_some())
}

/// Whether a message or summary created at `created` can go into `conversation` now: `None`
/// when it can, else what becomes of it. A deletion of the conversation stamped after the
/// record's creation took the record with it (`Ignored`: it must not bring the conversation's
/// contents back); a conversation that has not arrived yet makes it wait in `sync_pending`
/// (`Waiting`). Messages and summaries share this so the two cannot drift apart.
fn parent_conversation(
    tx: &Transaction<'_>,
    conversation: &str,
    created: &Stamp,
) -> Result<Option<Outcome>> {
    let conversation_tombstone = stamps(tx, Kind::Conversation, conversation)?
        .get("~")
        .cloned();
    if conversation_tombstone.as_ref().is_some_and(|t| created < t) {
        return Ok(Some(Outcome::Ignored));
    }
    if !conversation_exists(tx, conversation)? {
        return Ok(Some(Outcome::Waiting(conversation.to_string())));
    }
    Ok(None)
}

pub(crate) fn apply(
    tx: &Transaction<'_>,
    folder: &ImageFolder,
    record: &Record,
    fx: &mut Effects,
) -> Result<Outcome> {
    let kind = record.kind();
    let uid = record.uid();
    let known = stamps(tx, kind, uid)?;
    let tombstone = known.get("~");
    let outcome = match record {
        Record::Conversation {
            created_at,
            updated_at,
            model,
            created,
            title,
            pinned,
            settings,
            activity,
            ..
        } => {
            let exists = conversation_exists(tx, uid)?;
            let mut incoming = vec![
                ("created", created),
                ("title", &title.at),
                ("pinned", &pinned.at),
                ("settings", &settings.at),
            ];
            if let Some(a) = activity {
                incoming.push(("activity", a));
            }
            let Some(m) = merge(exists.then_some(&known), tombstone, &incoming) else {
                return Ok(Outcome::Ignored);
            };
            let title_value = if m.take.contains("title") {
                title.value.clone()
            } else {
                String::new()
            };
            if m.create {
                tx.execute(
                    "INSERT INTO conversations (id, title, created_at, updated_at, model, settings, pinned)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        uid,
                        title_value,
                        created_at,
                        after_deletion(*updated_at, tombstone),
                        model,
                        if m.take.contains("settings") {
                            settings.value.to_string()
                        } else {
                            "{}".to_string()
                        },
                        (m.take.contains("pinned") && pinned.value) as i64
                    ],
                )?;
                crate::search::index_title(tx, &ConversationId(uid.to_string()), &title_value)?;
            } else {
                tx.execute(
                    "UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                    params![uid, updated_at],
                )?;
                if m.take.contains("title") {
                    tx.execute(
                        "UPDATE conversations SET title = ?2 WHERE id = ?1",
                        params![uid, title.value],
                    )?;
                    crate::search::index_title(tx, &ConversationId(uid.to_string()), &title.value)?;
                }
                if m.take.contains("pinned") {
                    tx.execute(
                        "UPDATE conversations SET pinned = ?2 WHERE id = ?1",
                        params![uid, pinned.value as i64],
                    )?;
                }
                if m.take.contains("settings") {
                    tx.execute(
                        "UPDATE conversations SET settings = ?2 WHERE id = ?1",
                        params![uid, settings.value.to_string()],
                    )?;
                }
            }
            m.record_stamps(tx, kind, uid, &incoming, tombstone)?;
            if m.create || !m.take.is_empty() {
                Outcome::Applied
            } else {
                Outcome::Ignored
            }
        }
        Record::Message {
            conversation,
            role,
            created_at,
            created,
            body,
            images: pictures,
            ..
        } => {
            if tombstone.is_some() {
                return Ok(Outcome::Ignored);
            }
            if let Some(outcome) = parent_conversation(tx, conversation, created)? {
                return Ok(outcome);
            }
            let row: Option<(i64, String)> = tx
                .query_row(
                    "SELECT id, conversation_id FROM messages WHERE uid = ?1",
                    [uid],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            match row {
                Some((id, in_conversation)) => {
                    let pictured = attach_pictures(tx, folder, id, pictures)?;
                    if known.get("body").is_some_and(|b| &body.at <= b) {
                        if !pictured {
                            return Ok(Outcome::Ignored);
                        }
                    } else {
                        set_body(tx, id, &in_conversation, &body.value)?;
                        set_stamp(tx, kind, uid, "body", &body.at)?;
                        fx.stale_snapshots.insert(in_conversation);
                    }
                }
                None => {
                    let seq: i64 = tx.query_row(
                        "SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE conversation_id = ?1",
                        [conversation],
                        |r| r.get(0),
                    )?;
                    tx.execute(
                        "INSERT INTO messages (conversation_id, seq, role, text, status, created_at,
                            updated_at, timings, uid)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                        params![
                            conversation,
                            seq,
                            role,
                            body.value.text,
                            body.value.status,
                            created_at,
                            body.value.updated_at,
                            body.value.timings.as_ref().map(|t| t.to_string()),
                            uid
                        ],
                    )?;
                    let id = tx.last_insert_rowid();
                    attach_pictures(tx, folder, id, pictures)?;
                    crate::search::index_message(
                        tx,
                        &ConversationId(conversation.clone()),
                        MessageId(id),
                        &body.value.text,
                    )?;
                    set_stamp(tx, kind, uid, "created", created)?;
                    set_stamp(tx, kind, uid, "body", &body.at)?;
                    fx.reorder.insert(conversation.clone());
                }
            }
            Outcome::Applied
        }
        Record::Summary {
            conversation,
            first,
            last,
            text,
            token_count,
            model,
            created_at,
            created,
            first_created,
            ..
        } => {
            if tombstone.is_some() || known.contains_key("created") {
                return Ok(Outcome::Ignored);
            }
            // it covers a message the conversation's deletion took (created before it): it
            // went with that message, as `delete_message` takes it where it was already here
            if let Some(first_created) = first_created
                && stamps(tx, Kind::Conversation, conversation)?
                    .get("~")
                    .is_some_and(|t| first_created <= t)
            {
                return Ok(Outcome::Ignored);
            }
            if let Some(outcome) = parent_conversation(tx, conversation, created)? {
                return Ok(outcome);
            }
            let mut seqs = Vec::new();
            for m in [first, last] {
                let seq: Option<i64> = tx
                    .query_row(
                        "SELECT seq FROM messages WHERE uid = ?1 AND conversation_id = ?2",
                        params![m, conversation],
                        |r| r.get(0),
                    )
                    .optional()?;
                match seq {
                    Some(seq) => seqs.push(seq),
                    None if stamps(tx, Kind::Message, m)?.contains_key("~") => {
                        return Ok(Outcome::Ignored);
                    }
                    None => return Ok(Outcome::Waiting(m.clone())),
                }
            }
            // in the order of the ends' creation stamps, the order `finish` gives them: their
            // seqs may not be renumbered yet (a message of this file inserted at the end)
            let created_of = |m: &str| -> Result<Option<Stamp>> {
                Ok(stamps(tx, Kind::Message, m)?.get("created").cloned())
            };
            if created_of(first)? > created_of(last)? {
                return Ok(Outcome::Ignored);
            }
            if seqs[0] > seqs[1] {
                // put the conversation in that order now, so the summary's range is its own
                if order::renumber(tx, conversation)? {
                    fx.stale_snapshots.insert(conversation.clone());
                }
                for (seq, m) in seqs.iter_mut().zip([first, last]) {
                    *seq = tx.query_row(
                        "SELECT seq FROM messages WHERE uid = ?1 AND conversation_id = ?2",
                        params![m, conversation],
                        |r| r.get(0),
                    )?;
                }
            }
            tx.execute(
                "INSERT INTO summaries (conversation_id, first_seq, last_seq, text, token_count,
                    model, created_at, uid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    conversation,
                    seqs[0],
                    seqs[1],
                    text,
                    token_count,
                    model,
                    created_at,
                    uid
                ],
            )?;
            set_stamp(tx, kind, uid, "created", created)?;
            Outcome::Applied
        }
        Record::Note {
            conversation,
            created_at,
            updated_at,
            created,
            title,
            text,
            ..
        } => {
            let id: Option<i64> = tx
                .query_row("SELECT id FROM notes WHERE uid = ?1", [uid], |r| r.get(0))
                .optional()?;
            let incoming = [
                ("created", created),
                ("title", &title.at),
                ("text", &text.at),
            ];
            let Some(m) = merge(id.is_some().then_some(&known), tombstone, &incoming) else {
                return Ok(Outcome::Ignored);
            };
            let id = match id {
                Some(id) => id,
                None => {
                    tx.execute(
                        "INSERT INTO notes (title, text, conversation_id, created_at, updated_at, uid)
                         VALUES ('', '', ?1, ?2, ?3, ?4)",
                        params![
                            conversation,
                            created_at,
                            after_deletion(*updated_at, tombstone),
                            uid
                        ],
                    )?;
                    tx.last_insert_rowid()
                }
            };
            if m.take.contains("title") {
                tx.execute(
                    "UPDATE notes SET title = ?2 WHERE id = ?1",
                    params![id, title.value],
                )?;
            }
            if m.take.contains("text") {
                tx.execute(
                    "UPDATE notes SET text = ?2 WHERE id = ?1",
                    params![id, text.value],
                )?;
            }
            tx.execute(
                "UPDATE notes SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                params![id, updated_at],
            )?;
            reindex_note(tx, id)?;
            m.record_stamps(tx, kind, uid, &incoming, tombstone)?;
            Outcome::Applied
        }
        Record::Reminder {
            text,
            due_at,
            conversation,
            created_at,
            created,
            state,
            ..
        } => {
            let id: Option<i64> = tx
                .query_row("SELECT id FROM reminders WHERE uid = ?1", [uid], |r| {
                    r.get(0)
                })
                .optional()?;
            let incoming = [("created", created), ("state", &state.at)];
            let Some(m) = merge(id.is_some().then_some(&known), tombstone, &incoming) else {
                return Ok(Outcome::Ignored);
            };
            let id = match id {
                Some(id) => id,
                None => {
                    tx.execute(
                        "INSERT INTO reminders (text, due_at, conversation_id, created_at, uid)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![text, due_at, conversation, created_at, uid],
                    )?;
                    tx.last_insert_rowid()
                }
            };
            if m.take.contains("state") {
                tx.execute(
                    "UPDATE reminders SET notified_at = ?2, done_at = ?3 WHERE id = ?1",
                    params![id, state.value.notified_at, state.value.done_at],
                )?;
            }
            m.record_stamps(tx, kind, uid, &incoming, tombstone)?;
            Outcome::Applied
        }
        Record::ToolCall {
            conversation,
            tool,
            arguments,
            outcome,
            error_code,
            duration_ms,
            created_at,
            created,
            ..
        } => {
            if tombstone.is_some() || known.contains_key("created") {
                return Ok(Outcome::Ignored);
            }
            tx.execute(
                "INSERT INTO tool_calls (conversation_id, tool, arguments, outcome, error_code,
                    duration_ms, created_at, uid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    conversation,
                    tool,
                    arguments.to_string(),
                    outcome,
                    error_code,
                    duration_ms,
                    created_at,
                    uid
                ],
            )?;
            set_stamp(tx, kind, uid, "created", created)?;
            Outcome::Applied
        }
        Record::Deleted { of, at, .. } => {
            if tombstone.is_some_and(|t| t >= at) {
                return Ok(Outcome::Ignored);
            }
            set_stamp(tx, *of, uid, "~", at)?;
            delete(tx, *of, uid, at, &known, fx)?;
            Outcome::Applied
        }
    };
    if outcome == Outcome::Applied {
        fx.applied += 1;
    }
    Ok(outcome)
}

/// Give message `id` the record's pictures, files first, unless it has pictures here already;
/// `true` when it got them. A message's pictures never change, so this only fills in what a
/// copy of it that came without them left out (from a Companion that did not carry pictures,
/// or one whose file of a picture was gone), and the order records arrive in does not matter.
fn attach_pictures(
    tx: &Transaction<'_>,
    folder: &ImageFolder,
    id: i64,
    pictures: &[Picture],
) -> Result<bool> {
    if pictures.is_empty()
        || tx
            .query_row(
                "SELECT 1 FROM message_images WHERE message_id = ?1 LIMIT 1",
                [id],
                |_| Ok(()),
            )
            .optional()?
            .is_some()
    {
        return Ok(false);
    }
    for p in pictures {
        folder.write(&p.sha256, &picture_bytes(p)?)?;
    }
    let refs: Vec<ImageRef> = pictures
        .iter()
        .map(|p| ImageRef {
            sha256: p.sha256.clone(),
            mime: p.mime.clone(),
        })
        .collect();
    images::attach(tx, folder, MessageId(id), &refs)?;
    Ok(true)
}

fn set_body(tx: &Transaction<'_>, id: i64, conversation: &str, body: &Body) -> Result<()> {
    tx.execute(
        "UPDATE messages SET text = ?2, status = ?3, updated_at = ?4, timings = ?5 WHERE id = ?1",
        params![
            id,
            body.text,
            body.status,
            body.updated_at,
            body.timings.as_ref().map(|t| t.to_string())
        ],
    )?;
    crate::search::index_message(
        tx,
        &ConversationId(conversation.to_string()),
        MessageId(id),
        &body.text,
    )
}

fn reindex_note(tx: &Transaction<'_>, id: i64) -> Result<()> {
    let (title, text): (String, String) =
        tx.query_row("SELECT title, text FROM notes WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    tx.execute("DELETE FROM notes_index WHERE note_id = ?1", [id])?;
    tx.execute(
        "INSERT INTO notes_index (body, note_id) VALUES (?1, ?2)",
        params![crate::store::note_index_body(&title, &text), id],
    )?;
    Ok(())
}

/// A tombstone `at` for row (kind, uid), whose stamps were `known`.
fn delete(
    tx: &Transaction<'_>,
    kind: Kind,
    uid: &str,
    at: &Stamp,
    known: &HashMap<String, Stamp>,
    fx: &mut Effects,
) -> Result<()> {
    // the fields changed after the deletion; the others go back to their defaults
    let newer: Vec<&str> = known
        .iter()
        .filter(|(f, s)| f.as_str() != "~" && *s > at)
        .map(|(f, _)| f.as_str())
        .collect();
    let older: Vec<String> = known
        .iter()
        .filter(|(f, s)| f.as_str() != "~" && *s <= at)
        .map(|(f, _)| f.clone())
        .collect();
    match kind {
        Kind::Conversation => {
            if !conversation_exists(tx, uid)? {
                return Ok(());
            }
            let id = ConversationId(uid.to_string());
            if newer.is_empty() {
                tx.execute(
                    "DELETE FROM sync_clocks WHERE kind = 'message' AND uid IN
                        (SELECT uid FROM messages WHERE conversation_id = ?1)",
                    [uid],
                )?;
                tx.execute("DELETE FROM search_index WHERE conversation_id = ?1", [uid])?;
                if let Some(file) = crate::store::take_snapshot_row(tx, &id)? {
                    fx.files_to_remove.push(file);
                }
                tx.execute("DELETE FROM conversations WHERE id = ?1", [uid])?;
                forget_stamps(tx, kind, uid)?;
                return Ok(());
            }
            // changed after the deletion elsewhere: it stays, without what the deletion took
            tx.execute(
                "UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                params![uid, millis(at.hlc)],
            )?;
            for f in &older {
                let sql = match f.as_str() {
                    "title" => "UPDATE conversations SET title = '' WHERE id = ?1",
                    "pinned" => "UPDATE conversations SET pinned = 0 WHERE id = ?1",
                    "settings" => "UPDATE conversations SET settings = '{}' WHERE id = ?1",
                    _ => continue,
                };
                tx.execute(sql, [uid])?;
                set_stamp(tx, kind, uid, f, at)?;
                if f == "title" {
                    crate::search::index_title(tx, &id, "")?;
                }
            }
            let doomed: Vec<String> = {
                let mut stmt = tx.prepare(
                    "SELECT m.uid FROM messages m JOIN sync_clocks c
                        ON c.kind = 'message' AND c.uid = m.uid AND c.field = 'created'
                     WHERE m.conversation_id = ?1 AND (c.hlc < ?2 OR (c.hlc = ?2 AND c.device <= ?3))",
                )?;
                let rows = stmt.query_map(params![uid, at.hlc as i64, at.device], |r| r.get(0))?;
                rows.collect::<rusqlite::Result<_>>()?
            };
            for m in doomed {
                delete_message(tx, &m, fx)?;
                forget_stamps(tx, Kind::Message, &m)?;
            }
        }
        Kind::Message => delete_message(tx, uid, fx)?,
        Kind::Summary => {
            tx.execute("DELETE FROM summaries WHERE uid = ?1", [uid])?;
        }
        Kind::ToolCall => {
            tx.execute("DELETE FROM tool_calls WHERE uid = ?1", [uid])?;
        }
        Kind::Note => {
            let Some(id) = tx
                .query_row("SELECT id FROM notes WHERE uid = ?1", [uid], |r| {
                    r.get::<_, i64>(0)
                })
                .optional()?
            else {
                return Ok(());
            };
            if newer.is_empty() {
                tx.execute("DELETE FROM notes_index WHERE note_id = ?1", [id])?;
                tx.execute("DELETE FROM notes WHERE id = ?1", [id])?;
                forget_stamps(tx, kind, uid)?;
                return Ok(());
            }
            tx.execute(
                "UPDATE notes SET updated_at = max(updated_at, ?2) WHERE id = ?1",
                params![id, millis(at.hlc)],
            )?;
            for f in &older {
                let sql = match f.as_str() {
                    "title" => "UPDATE notes SET title = '' WHERE id = ?1",
                    "text" => "UPDATE notes SET text = '' WHERE id = ?1",
                    _ => continue,
                };
                tx.execute(sql, [id])?;
                set_stamp(tx, kind, uid, f, at)?;
            }
            reindex_note(tx, id)?;
        }
        Kind::Reminder => {
            if newer.is_empty() {
                tx.execute("DELETE FROM reminders WHERE uid = ?1", [uid])?;
                forget_stamps(tx, kind, uid)?;
                return Ok(());
            }
            if older.iter().any(|f| f == "state") {
                tx.execute(
                    "UPDATE reminders SET notified_at = NULL, done_at = NULL WHERE uid = ?1",
                    [uid],
                )?;
                set_stamp(tx, kind, uid, "state", at)?;
            }
        }
    }
    Ok(())
}

/// Delete one message with its search entry and the summaries that begin or end with it.
///
/// Only those: a summary names its first and last messages, and whether it exists must not
/// depend on the order files arrive. A message stamped between them that arrived after the
/// summary was made (another device's, written at the same time) sits inside its range on a
/// device that had it first and outside it on one that had the summary first; deleting it must
/// take the summary on both or neither. Every deletion Companion makes takes a suffix of the
/// conversation where it is made (an edit, a regeneration) or a prefix of it by stamp (the
/// conversation's deletion), so a summary that covered a deleted message of its own always
/// loses an end with it. Left as it is: a summary made on one device while another edited
/// away messages inside its range (before either heard of the other) keeps summarizing them,
/// the same everywhere, until the conversation's next summary replaces it.
fn delete_message(tx: &Transaction<'_>, uid: &str, fx: &mut Effects) -> Result<()> {
    let Some((id, conversation, seq)) = tx
        .query_row(
            "SELECT id, conversation_id, seq FROM messages WHERE uid = ?1",
            [uid],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            },
        )
        .optional()?
    else {
        return Ok(());
    };
    tx.execute(
        "DELETE FROM search_index WHERE kind = 'message' AND message_id = ?1",
        [id],
    )?;
    tx.execute(
        "DELETE FROM summaries WHERE conversation_id = ?1 AND (first_seq = ?2 OR last_seq = ?2)",
        params![conversation, seq],
    )?;
    tx.execute("DELETE FROM messages WHERE id = ?1", [id])?;
    fx.reorder.insert(conversation.clone());
    fx.stale_snapshots.insert(conversation);
    Ok(())
}
