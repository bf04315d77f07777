//! What travels through the sync folder: one record per changed row, carrying the row's whole
//! synced state with the stamp of each field, so that a record applies on its own, in any
//! order, any number of times (a state-based CRDT: each field a last-writer-wins register;
//! Shapiro et al., "Conflict-free Replicated Data Types", 2011). Deletions are tombstones.
//! Ids are the rows' stable uids, never SQLite's row ids, which differ per device.

use serde::{Deserialize, Serialize};

use super::clock::Stamp;

/// A field's value and when it was last set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field<T> {
    pub value: T,
    pub at: Stamp,
}

/// A message's changeable part: a reply stopped or edited is a newer body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Body {
    pub text: String,
    pub status: String,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<serde_json::Value>,
}

/// A picture of a message, carried whole in the message's record, so that a device that gets
/// the message gets its pictures with it (checked against `sha256` before anything is
/// written). Messages never change their pictures, so they travel again only with a changed
/// body or in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Picture {
    pub sha256: String,
    pub mime: String,
    /// The file's bytes, standard base64.
    #[serde(default)]
    pub data: String,
}

/// A reminder's changeable part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReminderState {
    pub notified_at: Option<i64>,
    pub done_at: Option<i64>,
}

/// The kinds of rows that sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Conversation,
    Message,
    Summary,
    Note,
    Reminder,
    ToolCall,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Conversation => "conversation",
            Kind::Message => "message",
            Kind::Summary => "summary",
            Kind::Note => "note",
            Kind::Reminder => "reminder",
            Kind::ToolCall => "tool_call",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "conversation" => Kind::Conversation,
            "message" => Kind::Message,
            "summary" => Kind::Summary,
            "note" => Kind::Note,
            "reminder" => Kind::Reminder,
            "tool_call" => Kind::ToolCall,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Conversation {
        uid: String,
        created_at: i64,
        /// The latest of every device's; merged by maximum.
        updated_at: i64,
        model: Option<String>,
        created: Stamp,
        title: Field<String>,
        pinned: Field<bool>,
        settings: Field<serde_json::Value>,
        /// The last message appended, changed or deleted in it: activity after a deletion
        /// keeps the conversation (a deletion loses to newer changes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        activity: Option<Stamp>,
    },
    Message {
        uid: String,
        conversation: String,
        role: String,
        created_at: i64,
        /// Also the message's place: messages are ordered by it.
        created: Stamp,
        body: Field<Body>,
        /// Its pictures, in order (absent from files of Companions before pictures).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Picture>,
    },
    Summary {
        uid: String,
        conversation: String,
        /// The uids of the first and last messages it covers.
        first: String,
        last: String,
        text: String,
        token_count: i64,
        model: String,
        created_at: i64,
        created: Stamp,
        /// The creation stamp of its first message. A conversation's deletion takes the
        /// messages created before it without a tombstone each, and the summaries covering
        /// them; this tells a device that never saw the first message (or saw it taken) that
        /// the summary went with it, instead of waiting for that message forever. Absent in
        /// files from before it was added (such a summary waits, as it always did).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_created: Option<Stamp>,
    },
    Note {
        uid: String,
        conversation: Option<String>,
        created_at: i64,
        updated_at: i64,
        created: Stamp,
        title: Field<String>,
        text: Field<String>,
    },
    Reminder {
        uid: String,
        text: String,
        due_at: i64,
        conversation: Option<String>,
        created_at: i64,
        created: Stamp,
        state: Field<ReminderState>,
    },
    ToolCall {
        uid: String,
        conversation: Option<String>,
        tool: String,
        arguments: serde_json::Value,
        outcome: String,
        error_code: Option<String>,
        duration_ms: i64,
        created_at: i64,
        created: Stamp,
    },
    Deleted {
        of: Kind,
        uid: String,
        at: Stamp,
    },
}

impl Record {
    pub fn kind(&self) -> Kind {
        match self {
            Record::Conversation { .. } => Kind::Conversation,
            Record::Message { .. } => Kind::Message,
            Record::Summary { .. } => Kind::Summary,
            Record::Note { .. } => Kind::Note,
            Record::Reminder { .. } => Kind::Reminder,
            Record::ToolCall { .. } => Kind::ToolCall,
            Record::Deleted { of, .. } => *of,
        }
    }

    pub fn uid(&self) -> &str {
        match self {
            Record::Conversation { uid, .. }
            | Record::Message { uid, .. }
            | Record::Summary { uid, .. }
            | Record::Note { uid, .. }
            | Record::Reminder { uid, .. }
            | Record::ToolCall { uid, .. }
            | Record::Deleted { uid, .. } => uid,
        }
    }

    /// The bytes of picture data it carries, which decide how many records share a file.
    pub fn picture_bytes(&self) -> usize {
        match self {
            Record::Message { images, .. } => images.iter().map(|p| p.data.len()).sum(),
            _ => 0,
        }
    }

    /// Every stamp the record carries (the receiving clock moves past the largest).
    pub fn stamps(&self) -> Vec<&Stamp> {
        match self {
            Record::Conversation {
                created,
                title,
                pinned,
                settings,
                activity,
                ..
            } => {
                let mut v = vec![created, &title.at, &pinned.at, &settings.at];
                v.extend(activity.as_ref());
                v
            }
            Record::Message { created, body, .. } => vec![created, &body.at],
            Record::Summary {
                created,
                first_created,
                ..
            } => {
                let mut v = vec![created];
                v.extend(first_created.as_ref());
                v
            }
            Record::ToolCall { created, .. } => vec![created],
            Record::Note {
                created,
                title,
                text,
                ..
            } => vec![created, &title.at, &text.at],
            Record::Reminder { created, state, .. } => vec![created, &state.at],
            Record::Deleted { at, .. } => vec![at],
        }
    }
}
