//! Reading rows out as records: the rows this device changed since its last segment (found
//! by their stamps in `sync_clocks`), or every row, for a snapshot. A reply still streaming
//! is left for the round after it finishes, when its stamps are newer again. A message's
//! pictures are read from their files into its record; one whose file is missing or damaged
//! is left out (with a warning) rather than holding back everything else.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::clock::Stamp;
use super::record::{Body, Field, Kind, Picture, Record, ReminderState};
use crate::error::Result;
use crate::store::ImageFolder;
use crate::store::images::to_base64;

/// Every stamp of one row, by field.
pub(crate) fn stamps(conn: &Connection, kind: Kind, uid: &str) -> Result<HashMap<String, Stamp>> {
    let mut stmt = conn.prepare_cached(
        "SELECT field, hlc, device FROM sync_clocks WHERE kind = ?1 AND uid = ?2",
    )?;
    let rows = stmt.query_map(params![kind.as_str(), uid], |r| {
        Ok((
            r.get::<_, String>(0)?,
            Stamp::new(r.get::<_, i64>(1)? as u64, r.get::<_, String>(2)?),
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn stamp_of(stamps: &HashMap<String, Stamp>, field: &str) -> Stamp {
    stamps
        .get(field)
        .cloned()
        .unwrap_or_else(|| Stamp::new(0, ""))
}

/// The rows (kind, uid) with a stamp of `device` newer than `since`, oldest change first,
/// and the newest such stamp.
pub(crate) fn changed_since(
    conn: &Connection,
    device: &str,
    since: u64,
) -> Result<(Vec<(Kind, String)>, u64)> {
    let mut stmt = conn.prepare(
        "SELECT kind, uid, max(hlc) AS last FROM sync_clocks WHERE device = ?1 AND hlc > ?2
         GROUP BY kind, uid ORDER BY last",
    )?;
    let mut newest = since;
    let rows = stmt.query_map(params![device, since as i64], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, uid, last) = row?;
        newest = newest.max(last as u64);
        if let Some(kind) = Kind::parse(&kind) {
            out.push((kind, uid));
        }
    }
    Ok((out, newest))
}

/// Every row that syncs and every tombstone, for a snapshot.
pub(crate) fn everything(conn: &Connection) -> Result<Vec<(Kind, String)>> {
    let mut out = Vec::new();
    for (kind, sql) in [
        (Kind::Conversation, "SELECT id FROM conversations"),
        (
            Kind::Message,
            "SELECT uid FROM messages WHERE uid IS NOT NULL ORDER BY conversation_id, seq",
        ),
        (
            Kind::Summary,
            "SELECT uid FROM summaries WHERE uid IS NOT NULL",
        ),
        (Kind::Note, "SELECT uid FROM notes WHERE uid IS NOT NULL"),
        (
            Kind::Reminder,
            "SELECT uid FROM reminders WHERE uid IS NOT NULL",
        ),
        (
            Kind::ToolCall,
            "SELECT uid FROM tool_calls WHERE uid IS NOT NULL",
        ),
    ] {
        let mut stmt = conn.prepare(sql)?;
        let uids = stmt.query_map([], |r| r.get::<_, String>(0))?;
        for uid in uids {
            out.push((kind, uid?));
        }
    }
    let mut stmt = conn.prepare("SELECT kind, uid FROM sync_clocks WHERE field = '~'")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    for row in rows {
        let (kind, uid) = row?;
        if let Some(kind) = Kind::parse(&kind) {
            out.push((kind, uid));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Every row's and tombstone's records, in the order they are written: a snapshot's contents.
pub(crate) fn whole_state(conn: &Connection, images: &ImageFolder) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    for (kind, uid) in everything(conn)? {
        records.extend(records_for(conn, images, kind, &uid)?);
    }
    sort_for_writing(&mut records);
    Ok(records)
}

/// The records that carry row (kind, uid): its state when it exists, its tombstone when it
/// has one (a row deleted and then changed again elsewhere has both).
pub(crate) fn records_for(
    conn: &Connection,
    images: &ImageFolder,
    kind: Kind,
    uid: &str,
) -> Result<Vec<Record>> {
    let stamps = stamps(conn, kind, uid)?;
    let mut out = Vec::new();
    if let Some(mut record) = row_record(conn, kind, uid, &stamps)? {
        if let Record::Message {
            images: pictures, ..
        } = &mut record
        {
            *pictures = message_pictures(conn, images, uid)?;
        }
        out.push(record);
    }
    if let Some(at) = stamps.get("~") {
        out.push(Record::Deleted {
            of: kind,
            uid: uid.to_string(),
            at: at.clone(),
        });
    }
    Ok(out)
}

fn row_record(
    conn: &Connection,
    kind: Kind,
    uid: &str,
    stamps: &HashMap<String, Stamp>,
) -> Result<Option<Record>> {
    let s = |field: &str| stamp_of(stamps, field);
    Ok(match kind {
        Kind::Conversation => conn
            .query_row(
                "SELECT created_at, updated_at, model, title, pinned, settings
                 FROM conversations WHERE id = ?1",
                [uid],
                |r| {
                    let settings: String = r.get(5)?;
                    Ok(Record::Conversation {
                        uid: uid.to_string(),
                        created_at: r.get(0)?,
                        updated_at: r.get(1)?,
                        model: r.get(2)?,
                        created: s("created"),
                        title: Field {
                            value: r.get(3)?,
                            at: s("title"),
                        },
                        pinned: Field {
                            value: r.get::<_, i64>(4)? != 0,
                            at: s("pinned"),
                        },
                        settings: Field {
                            value: serde_json::from_str(&settings)
                                .unwrap_or(serde_json::Value::Null),
                            at: s("settings"),
                        },
                        activity: stamps.get("activity").cloned(),
                    })
                },
            )
            .optional()?,
        Kind::Message => conn
            .query_row(
                "SELECT conversation_id, role, created_at, text, status, updated_at, timings
                 FROM messages WHERE uid = ?1 AND status != 'streaming'",
                [uid],
                |r| {
                    let timings: Option<String> = r.get(6)?;
                    Ok(Record::Message {
                        uid: uid.to_string(),
                        conversation: r.get(0)?,
                        role: r.get(1)?,
                        created_at: r.get(2)?,
                        created: s("created"),
                        body: Field {
                            value: Body {
                                text: r.get(3)?,
                                status: r.get(4)?,
                                updated_at: r.get(5)?,
                                timings: timings.and_then(|t| serde_json::from_str(&t).ok()),
                            },
                            at: s("body"),
                        },
                        images: Vec::new(),
                    })
                },
            )
            .optional()?,
        Kind::Summary => conn
            .query_row(
                "SELECT s.conversation_id, f.uid, l.uid, s.text, s.token_count, s.model, s.created_at,
                    c.hlc, c.device
                 FROM summaries s
                 JOIN messages f ON f.conversation_id = s.conversation_id AND f.seq = s.first_seq
                 JOIN messages l ON l.conversation_id = s.conversation_id AND l.seq = s.last_seq
                 LEFT JOIN sync_clocks c ON c.kind = 'message' AND c.uid = f.uid
                    AND c.field = 'created'
                 WHERE s.uid = ?1",
                [uid],
                |r| {
                    Ok(Record::Summary {
                        uid: uid.to_string(),
                        conversation: r.get(0)?,
                        first: r.get(1)?,
                        last: r.get(2)?,
                        text: r.get(3)?,
                        token_count: r.get(4)?,
                        model: r.get(5)?,
                        created_at: r.get(6)?,
                        created: s("created"),
                        first_created: match (r.get::<_, Option<i64>>(7)?, r.get::<_, Option<String>>(8)?) {
                            (Some(hlc), Some(device)) => Some(Stamp::new(hlc as u64, device)),
                            _ => None,
                        },
                    })
                },
            )
            .optional()?,
        Kind::Note => conn
            .query_row(
                "SELECT conversation_id, created_at, updated_at, title, text FROM notes WHERE uid = ?1",
                [uid],
                |r| {
                    Ok(Record::Note {
                        uid: uid.to_string(),
                        conversation: r.get(0)?,
                        created_at: r.get(1)?,
                        updated_at: r.get(2)?,
                        created: s("created"),
                        title: Field {
                            value: r.get(3)?,
                            at: s("title"),
                        },
                        text: Field {
                            value: r.get(4)?,
                            at: s("text"),
                        },
                    })
                },
            )
            .optional()?,
        Kind::Reminder => conn
            .query_row(
                "SELECT text, due_at, conversation_id, created_at, notified_at, done_at
                 FROM reminders WHERE uid = ?1",
                [uid],
                |r| {
                    Ok(Record::Reminder {
                        uid: uid.to_string(),
                        text: r.get(0)?,
                        due_at: r.get(1)?,
                        conversation: r.get(2)?,
                        created_at: r.get(3)?,
                        created: s("created"),
                        state: Field {
                            value: ReminderState {
                                notified_at: r.get(4)?,
                                done_at: r.get(5)?,
                            },
                            at: s("state"),
                        },
                    })
                },
            )
            .optional()?,
        Kind::ToolCall => conn
            .query_row(
                "SELECT conversation_id, tool, arguments, outcome, error_code, duration_ms, created_at
                 FROM tool_calls WHERE uid = ?1",
                [uid],
                |r| {
                    let arguments: String = r.get(2)?;
                    Ok(Record::ToolCall {
                        uid: uid.to_string(),
                        conversation: r.get(0)?,
                        tool: r.get(1)?,
                        arguments: serde_json::from_str(&arguments)
                            .unwrap_or(serde_json::Value::String(arguments)),
                        outcome: r.get(3)?,
                        error_code: r.get(4)?,
                        duration_ms: r.get(5)?,
                        created_at: r.get(6)?,
                        created: s("created"),
                    })
                },
            )
            .optional()?,
    })
}

/// The pictures of message `uid`, in order, with their bytes.
fn message_pictures(conn: &Connection, images: &ImageFolder, uid: &str) -> Result<Vec<Picture>> {
    let refs: Vec<(String, String)> = {
        let mut stmt = conn.prepare_cached(
            "SELECT l.sha256, i.mime FROM message_images l
             JOIN images i ON i.sha256 = l.sha256
             JOIN messages m ON m.id = l.message_id
             WHERE m.uid = ?1 ORDER BY l.position",
        )?;
        let rows = stmt.query_map([uid], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut out = Vec::new();
    for (sha256, mime) in refs {
        match images.read(&sha256) {
            Ok(bytes) => out.push(Picture {
                data: to_base64(&bytes),
                sha256,
                mime,
            }),
            Err(e) => tracing::warn!(message = uid, error = %e, "a picture is not synced"),
        }
    }
    Ok(out)
}

/// The order records are written in: parents before children, messages in their order, so
/// that a reader applies a file front to back with as little waiting as possible.
pub(crate) fn sort_for_writing(records: &mut [Record]) {
    records.sort_by(|a, b| {
        let rank = |r: &Record| match r {
            Record::Conversation { .. } => 0,
            Record::Message { .. } => 1,
            Record::Summary { .. } => 2,
            Record::Note { .. } | Record::Reminder { .. } | Record::ToolCall { .. } => 3,
            Record::Deleted { .. } => 4,
        };
        let first = |r: &Record| r.stamps().first().map(|s| (*s).clone());
        (rank(a), first(a)).cmp(&(rank(b), first(b)))
    });
}
