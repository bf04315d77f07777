//! Export a conversation to Markdown (for people) and JSON (for machines), and import the JSON
//! back: export → import → export gives the same JSON, ids, times and statuses included. An
//! export is a file from anywhere: its conversation id is kept only when it is a UUID, since ids
//! end up in file names. Pictures travel inside the JSON (base64, each once however often it
//! is attached) and are checked whole — kind, size, sha256 — before anything is written; an
//! export without pictures is the same JSON as before pictures existed.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::images::{from_base64, sizes, to_base64};
use crate::types::{
    Conversation, ConversationId, ImageRef, MessageStatus, NewMessage, NewSummary, Role, rfc3339,
};

pub const EXPORT_FORMAT: &str = "companion.conversation";
pub const EXPORT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationExport {
    pub format: String,
    pub version: u32,
    pub conversation: Conversation,
    pub messages: Vec<ExportedMessage>,
    pub summaries: Vec<ExportedSummary>,
    /// Every picture the messages name, once each, in the order they first appear.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ExportedImage>,
}

/// A picture inside an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportedImage {
    pub sha256: String,
    pub mime_type: String,
    /// The file's bytes, standard base64.
    pub data: String,
}

/// What an import made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The imported conversation's id.
    pub id: ConversationId,
    /// The export's own id when it was not a valid one and `id` was made instead.
    pub replaced_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportedMessage {
    pub seq: i64,
    pub role: Role,
    pub text: String,
    pub token_count: Option<i64>,
    pub status: MessageStatus,
    pub created_at: i64,
    pub updated_at: i64,
    pub timings: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportedSummary {
    pub first_seq: i64,
    pub last_seq: i64,
    pub text: String,
    pub token_count: i64,
    pub model: String,
    pub created_at: i64,
}

impl Store {
    pub fn export(&self, id: &ConversationId) -> Result<ConversationExport> {
        let conversation = self.conversation(id)?;
        let messages: Vec<ExportedMessage> = self
            .messages(id)?
            .into_iter()
            .map(|m| ExportedMessage {
                seq: m.seq,
                role: m.role,
                text: m.text,
                token_count: m.token_count,
                status: m.status,
                created_at: m.created_at,
                updated_at: m.updated_at,
                timings: m.timings,
                images: m.images,
            })
            .collect();
        let mut images = Vec::new();
        let mut seen = HashSet::new();
        for image in messages.iter().flat_map(|m| &m.images) {
            if seen.insert(&image.sha256) {
                images.push(ExportedImage {
                    sha256: image.sha256.clone(),
                    mime_type: image.mime.clone(),
                    data: to_base64(&self.image_bytes(image)?),
                });
            }
        }
        let summaries = self
            .summaries(id)?
            .into_iter()
            .map(|s| ExportedSummary {
                first_seq: s.first_seq,
                last_seq: s.last_seq,
                text: s.text,
                token_count: s.token_count,
                model: s.model,
                created_at: s.created_at,
            })
            .collect();
        Ok(ConversationExport {
            format: EXPORT_FORMAT.into(),
            version: EXPORT_VERSION,
            conversation,
            messages,
            summaries,
            images,
        })
    }

    pub fn export_json(&self, id: &ConversationId) -> Result<String> {
        serde_json::to_string_pretty(&self.export(id)?)
            .map_err(|e| Error::InvalidArgument(format!("cannot encode the export: {e}")))
    }

    /// Import an export. With `new_id` the conversation gets a fresh id (importing a copy
    /// next to the original); otherwise it keeps its id when that is a valid one (see
    /// [`ConversationId::is_valid`]; an existing conversation with the same id is then an
    /// error) and gets a fresh one otherwise, which [`Imported::replaced_id`] reports.
    pub fn import(&self, export: &ConversationExport, new_id: bool) -> Result<Imported> {
        validate(export)?;
        let pictures = decode_images(export)?;
        let mut conversation = export.conversation.clone();
        let mut replaced_id = None;
        if new_id {
            conversation.id = ConversationId::new_random();
        } else if !conversation.id.is_valid() {
            tracing::info!("imported conversation had an invalid id; given a new one");
            replaced_id = Some(conversation.id.0.clone());
            conversation.id = ConversationId::new_random();
        }
        // checked before the picture files are written (the transaction checks it again), so
        // that an import refused for it leaves none behind
        if self.conversation(&conversation.id).is_ok() {
            return Err(Error::ConversationExists(conversation.id.to_string()));
        }
        // the files first: a message's row may only name a picture that is there
        for (sha256, bytes) in &pictures {
            self.images.write(sha256, bytes)?;
        }
        self.in_transaction(|tx| {
            crate::store::insert_conversation(tx, &conversation)?;
            crate::search::index_title(tx, &conversation.id, &conversation.title)?;
            for m in &export.messages {
                let id = crate::store::insert_message(
                    tx,
                    &self.images,
                    &conversation.id,
                    &NewMessage {
                        role: m.role,
                        text: m.text.clone(),
                        token_count: m.token_count,
                        status: m.status,
                        timings: m.timings.clone(),
                        images: m.images.clone(),
                    },
                    Some((m.seq, m.created_at, m.updated_at)),
                )?;
                if m.status != MessageStatus::Streaming {
                    crate::search::index_message(tx, &conversation.id, id, &m.text)?;
                }
            }
            for s in &export.summaries {
                crate::store::insert_summary(
                    tx,
                    &conversation.id,
                    &NewSummary {
                        first_seq: s.first_seq,
                        last_seq: s.last_seq,
                        text: s.text.clone(),
                        token_count: s.token_count,
                        model: s.model.clone(),
                    },
                    s.created_at,
                )?;
            }
            Ok(())
        })?;
        Ok(Imported {
            id: conversation.id,
            replaced_id,
        })
    }

    pub fn import_json(&self, json: &str, new_id: bool) -> Result<Imported> {
        let export: ConversationExport =
            serde_json::from_str(json).map_err(|e| Error::InvalidExport(e.to_string()))?;
        self.import(&export, new_id)
    }

    /// The conversation as Markdown: a title, then each message under its role, with a line
    /// per picture it had (its kind and size: the picture itself stays out).
    pub fn export_markdown(&self, id: &ConversationId) -> Result<String> {
        let c = self.conversation(id)?;
        let mut out = format!("# {}\n\n", c.title.trim());
        out.push_str(&format!("_Created {}", rfc3339(c.created_at)));
        if let Some(model) = &c.model {
            out.push_str(&format!(" · model {model}"));
        }
        out.push_str("_\n");
        let messages = self.messages(id)?;
        let shas: Vec<&str> = messages
            .iter()
            .flat_map(|m| &m.images)
            .map(|i| i.sha256.as_str())
            .collect();
        let sizes = sizes(&self.conn, &shas)?;
        for m in &messages {
            let who = match m.role {
                Role::System => "System",
                Role::User => "You",
                Role::Assistant => "Companion",
            };
            let note = match m.status {
                MessageStatus::Complete => "",
                MessageStatus::Stopped => " (stopped)",
                MessageStatus::Error => " (failed)",
                MessageStatus::Streaming => " (in progress)",
            };
            out.push_str(&format!("\n## {who}{note}\n\n{}\n", m.text.trim_end()));
            if !m.images.is_empty() {
                out.push('\n');
            }
            for image in &m.images {
                let size = sizes.get(&image.sha256).copied().unwrap_or(0);
                out.push_str(&format!(
                    "_[picture: {}, {}]_\n",
                    image.mime,
                    human_size(size)
                ));
            }
        }
        Ok(out)
    }
}

/// `12 KB`, `3.4 MB`: decimal units, as the Finder and the Files app show sizes.
fn human_size(bytes: i64) -> String {
    let bytes = bytes.max(0);
    if bytes < 1_000_000 {
        format!("{} KB", (bytes + 999) / 1000)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// The export's pictures, decoded and checked, by sha256: each message's pictures must be
/// among them (with the same kind), and each of them must be a message's; otherwise the
/// export is refused before anything is written.
fn decode_images(e: &ConversationExport) -> Result<HashMap<String, Vec<u8>>> {
    let short = |sha: &str| format!("{}…", sha.get(..12).unwrap_or(sha));
    let mut kinds: HashMap<&str, &str> = HashMap::new();
    let mut pictures = HashMap::new();
    for image in &e.images {
        let bytes = from_base64(&image.sha256, &image.mime_type, &image.data)
            .map_err(Error::InvalidExport)?;
        if kinds.insert(&image.sha256, &image.mime_type).is_some() {
            return Err(Error::InvalidExport(format!(
                "picture {} is listed twice",
                short(&image.sha256)
            )));
        }
        pictures.insert(image.sha256.clone(), bytes);
    }
    let mut named = HashSet::new();
    for m in &e.messages {
        for image in &m.images {
            match kinds.get(image.sha256.as_str()) {
                None => {
                    return Err(Error::InvalidExport(format!(
                        "message {} names a picture the export does not hold",
                        m.seq
                    )));
                }
                Some(kind) if *kind != image.mime => {
                    return Err(Error::InvalidExport(format!(
                        "message {} gives picture {} as {:?}, the export as {kind}",
                        m.seq,
                        short(&image.sha256),
                        image.mime
                    )));
                }
                Some(_) => named.insert(image.sha256.as_str()),
            };
        }
    }
    if let Some(extra) = kinds.keys().find(|sha| !named.contains(*sha)) {
        return Err(Error::InvalidExport(format!(
            "picture {} belongs to no message",
            short(extra)
        )));
    }
    Ok(pictures)
}

fn validate(e: &ConversationExport) -> Result<()> {
    if e.format != EXPORT_FORMAT {
        return Err(Error::InvalidExport(format!(
            "format is `{}`, expected `{EXPORT_FORMAT}`",
            e.format
        )));
    }
    if e.version != EXPORT_VERSION {
        return Err(Error::InvalidExport(format!(
            "version {} is not supported (this Companion reads version {EXPORT_VERSION})",
            e.version
        )));
    }
    if e.conversation.id.as_str().trim().is_empty() {
        return Err(Error::InvalidExport("the conversation id is empty".into()));
    }
    if e.messages.windows(2).any(|w| w[0].seq >= w[1].seq) {
        return Err(Error::InvalidExport(
            "messages are not in increasing `seq` order".into(),
        ));
    }
    if e.summaries.iter().any(|s| s.first_seq > s.last_seq) {
        return Err(Error::InvalidExport(
            "a summary covers an empty range".into(),
        ));
    }
    Ok(())
}
