//! Export a conversation to Markdown (for people) and JSON (for machines), and import the JSON
//! back: export → import → export gives the same JSON, ids, times and statuses included. An
//! export is a file from anywhere: its conversation id is kept only when it is a UUID, since ids
//! end up in file names.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::Store;
use crate::types::{
    Conversation, ConversationId, MessageStatus, NewMessage, NewSummary, Role, rfc3339,
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
        let messages = self
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
            })
            .collect();
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
        let mut conversation = export.conversation.clone();
        let mut replaced_id = None;
        if new_id {
            conversation.id = ConversationId::new_random();
        } else if !conversation.id.is_valid() {
            tracing::info!("imported conversation had an invalid id; given a new one");
            replaced_id = Some(conversation.id.0.clone());
            conversation.id = ConversationId::new_random();
        }
        self.in_transaction(|tx| {
            crate::store::insert_conversation(tx, &conversation)?;
            crate::search::index_title(tx, &conversation.id, &conversation.title)?;
            for m in &export.messages {
                let id = crate::store::insert_message(
                    tx,
                    &conversation.id,
                    &NewMessage {
                        role: m.role,
                        text: m.text.clone(),
                        token_count: m.token_count,
                        status: m.status,
                        timings: m.timings.clone(),
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

    /// The conversation as Markdown: a title, then each message under its role.
    pub fn export_markdown(&self, id: &ConversationId) -> Result<String> {
        let c = self.conversation(id)?;
        let mut out = format!("# {}\n\n", c.title.trim());
        out.push_str(&format!("_Created {}", rfc3339(c.created_at)));
        if let Some(model) = &c.model {
            out.push_str(&format!(" · model {model}"));
        }
        out.push_str("_\n");
        for m in self.messages(id)? {
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
        }
        Ok(out)
    }
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
