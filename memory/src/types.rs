//! The records the store holds and the newtype ids that name them. Times are milliseconds
//! since the Unix epoch (UTC).

use serde::{Deserialize, Serialize};

/// A conversation's id: a random UUID, so conversations exported from one device and imported
/// on another never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConversationId(pub String);

impl ConversationId {
    pub fn new_random() -> Self {
        ConversationId(uuid::Uuid::new_v4().to_string())
    }

    /// Whether this is an id Companion makes: a UUID in its canonical form (lowercase,
    /// hyphenated), and so only `0-9a-f` and `-`. Ids from outside (an imported export) are
    /// checked with it, since an id becomes part of file names (KV snapshots).
    pub fn is_valid(&self) -> bool {
        uuid::Uuid::try_parse(&self.0).is_ok_and(|u| u.hyphenated().to_string() == self.0)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ConversationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A message's row id (local to this database; exports use the position `seq` instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(pub i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SummaryId(pub i64);

/// A summarized (or being summarized) document's row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DocumentId(pub i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Role> {
        match s {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        }
    }
}

/// Where a message stands. A reply is `Streaming` while it is generated (checkpointed as it
/// grows) and ends `Complete`, `Stopped` (the user stopped it, or the program ended mid-reply:
/// the text so far is kept) or `Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    Streaming,
    Complete,
    Stopped,
    Error,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Streaming => "streaming",
            MessageStatus::Complete => "complete",
            MessageStatus::Stopped => "stopped",
            MessageStatus::Error => "error",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<MessageStatus> {
        match s {
            "streaming" => Some(MessageStatus::Streaming),
            "complete" => Some(MessageStatus::Complete),
            "stopped" => Some(MessageStatus::Stopped),
            "error" => Some(MessageStatus::Error),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: ConversationId,
    pub title: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// The model the conversation was held with (its file name or sha256), if known.
    pub model: Option<String>,
    /// Per-conversation settings as the app keeps them (sampling, system prompt, …).
    pub settings: serde_json::Value,
    pub pinned: bool,
}

/// A row of the conversation list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationListItem {
    #[serde(flatten)]
    pub conversation: Conversation,
    pub message_count: i64,
    /// The start of the last message, for the sidebar.
    pub preview: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: MessageId,
    pub conversation_id: ConversationId,
    /// Position in the conversation, from 0.
    pub seq: i64,
    pub role: Role,
    pub text: String,
    pub token_count: Option<i64>,
    pub status: MessageStatus,
    pub created_at: i64,
    pub updated_at: i64,
    /// Timing figures of a reply (time to first token, tokens/s, …) as the glue reports them.
    pub timings: Option<serde_json::Value>,
    /// The pictures attached to it, in the order they were attached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRef>,
}

/// A picture kept in the store's image folder, named by the sha256 of its bytes: the same
/// picture attached twice (or in two conversations) is kept once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRef {
    /// Lowercase hex of the sha256 of the file's bytes.
    pub sha256: String,
    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    #[serde(rename = "mimeType")]
    pub mime: String,
}

/// A message to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub role: Role,
    pub text: String,
    pub token_count: Option<i64>,
    pub status: MessageStatus,
    pub timings: Option<serde_json::Value>,
    /// Pictures saved first with [`crate::Store::save_image`].
    pub images: Vec<ImageRef>,
}

impl NewMessage {
    pub fn complete(role: Role, text: impl Into<String>, token_count: Option<i64>) -> Self {
        NewMessage {
            role,
            text: text.into(),
            token_count,
            status: MessageStatus::Complete,
            timings: None,
            images: Vec::new(),
        }
    }

    /// The same message with these pictures attached.
    pub fn with_images(mut self, images: Vec<ImageRef>) -> Self {
        self.images = images;
        self
    }
}

/// An L2 summary: the model's summary of the messages `first_seq..=last_seq`. A later summary
/// whose range contains an earlier one's replaces it in the prompt (summaries of summaries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub id: SummaryId,
    pub conversation_id: ConversationId,
    pub first_seq: i64,
    pub last_seq: i64,
    pub text: String,
    pub token_count: i64,
    pub model: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewSummary {
    pub first_seq: i64,
    pub last_seq: i64,
    pub text: String,
    pub token_count: i64,
    pub model: String,
}

/// What a stored KV snapshot was made with; a snapshot is only used when both still match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotKey {
    pub model_sha256: String,
    pub format_version: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotInfo {
    pub conversation_id: ConversationId,
    pub key: SnapshotKey,
    pub token_count: i64,
    pub byte_count: i64,
    pub created_at: i64,
    pub last_used_at: i64,
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `ms` as an RFC 3339 UTC date-time, e.g. `2026-11-30T03:10:00Z` (seconds precision).
pub fn rfc3339(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}
