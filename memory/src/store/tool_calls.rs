//! The audit log: every tool call the agent made or tried — which conversation, which tool,
//! its exact arguments, how it ended (done, failed with an error code, or declined by the
//! user), how long it took and when. It is what the app's Activity view shows. Rows are not
//! tied to a conversation by a foreign key: what a tool did stays visible after its
//! conversation is deleted, until the user clears the log.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::Result;
use crate::types::{ConversationId, now_ms};

/// A tool call's row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolCallId(pub i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolOutcome {
    Ok,
    Error,
    /// The user said no to a write.
    Denied,
}

impl ToolOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
            ToolOutcome::Denied => "denied",
        }
    }

    fn parse(s: &str) -> ToolOutcome {
        match s {
            "ok" => ToolOutcome::Ok,
            "denied" => ToolOutcome::Denied,
            _ => ToolOutcome::Error,
        }
    }
}

/// A call to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewToolCall {
    pub conversation_id: Option<ConversationId>,
    pub tool: String,
    /// The arguments exactly as the call gave them.
    pub arguments: serde_json::Value,
    pub outcome: ToolOutcome,
    pub error_code: Option<String>,
    pub duration_ms: i64,
    /// When the call started; `None`: now.
    pub at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub id: ToolCallId,
    pub conversation_id: Option<ConversationId>,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub outcome: ToolOutcome,
    pub error_code: Option<String>,
    pub duration_ms: i64,
    pub created_at: i64,
}

impl Store {
    pub fn record_tool_call(&self, call: &NewToolCall) -> Result<ToolCallId> {
        self.conn.execute(
            "INSERT INTO tool_calls (conversation_id, tool, arguments, outcome, error_code, duration_ms, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                call.conversation_id.as_ref().map(|c| c.as_str()),
                call.tool,
                call.arguments.to_string(),
                call.outcome.as_str(),
                call.error_code,
                call.duration_ms.max(0),
                call.at.unwrap_or_else(now_ms),
            ],
        )?;
        Ok(ToolCallId(self.conn.last_insert_rowid()))
    }

    /// Recorded calls, newest first; of one conversation when given.
    pub fn tool_calls(
        &self,
        conversation: Option<&ConversationId>,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<ToolCallRecord>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, conversation_id, tool, arguments, outcome, error_code, duration_ms, created_at
             FROM tool_calls WHERE ?1 IS NULL OR conversation_id = ?1
             ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3",
        )?;
        let rows = stmt.query_map(
            params![
                conversation.map(|c| c.as_str()),
                limit.max(0),
                offset.max(0)
            ],
            |r| {
                let arguments: String = r.get(3)?;
                Ok(ToolCallRecord {
                    id: ToolCallId(r.get(0)?),
                    conversation_id: r.get::<_, Option<String>>(1)?.map(ConversationId),
                    tool: r.get(2)?,
                    // written by `record_tool_call` from a JSON value: it parses back
                    arguments: serde_json::from_str(&arguments)
                        .unwrap_or(serde_json::Value::String(arguments)),
                    outcome: ToolOutcome::parse(&r.get::<_, String>(4)?),
                    error_code: r.get(5)?,
                    duration_ms: r.get(6)?,
                    created_at: r.get(7)?,
                })
            },
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Empty the audit log; returns how many rows went.
    pub fn clear_tool_calls(&self) -> Result<usize> {
        Ok(self.conn.execute("DELETE FROM tool_calls", [])?)
    }
}
