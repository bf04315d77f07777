//! What the webview is sent: the store's and the engine's records reshaped for the UI
//! (`frontend/src/types.ts` is the other half of this contract). Reply timings are stored with
//! each message (`Message::timings`, the engine's `GenerationStats`) and shown from there.

use engine::{GenerationStats, StopReason};
use memory::{ConversationListItem, ImageRef, Message, MessageStatus, Role, SearchHit};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationItem {
    pub id: String,
    pub title: String,
    pub pinned: bool,
    pub created_at: i64,
    pub updated_at: i64,
    pub message_count: i64,
    pub preview: Option<String>,
    /// The agent's tools are on in this conversation.
    pub tools: bool,
}

impl From<ConversationListItem> for ConversationItem {
    fn from(item: ConversationListItem) -> Self {
        let c = item.conversation;
        ConversationItem {
            id: c.id.0,
            title: c.title,
            pinned: c.pinned,
            created_at: c.created_at,
            updated_at: c.updated_at,
            message_count: item.message_count,
            preview: item.preview,
            tools: crate::commands::agent::tools_enabled(&c.settings),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyStats {
    pub time_to_first_token_ms: f64,
    pub tokens_per_second: f64,
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    pub stop_reason: StopReason,
}

impl ReplyStats {
    pub fn new(stats: &GenerationStats, stop_reason: StopReason) -> Self {
        ReplyStats {
            time_to_first_token_ms: stats.time_to_first_token_seconds * 1000.0,
            tokens_per_second: stats.decode_tokens_per_second,
            prompt_tokens: stats.prompt_tokens,
            reused_tokens: stats.reused_tokens,
            generated_tokens: stats.generated_tokens,
            stop_reason,
        }
    }
}

/// The chat crate stores a reply's `GenerationStats` as its timings; the stop reason is not
/// among them, so it is told from the message's status.
fn stats_from_timings(timings: &serde_json::Value, status: MessageStatus) -> Option<ReplyStats> {
    // a turn with tools keeps its calls there, not one generation's stats
    if timings.get(chat::manager::TOOL_CALLS_KEY).is_some() {
        return None;
    }
    let stats: GenerationStats = serde_json::from_value(timings.clone()).ok()?;
    let stop_reason = match status {
        MessageStatus::Stopped => StopReason::Cancelled,
        _ => StopReason::EndOfTurn,
    };
    Some(ReplyStats::new(&stats, stop_reason))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    pub id: i64,
    pub seq: i64,
    pub role: Role,
    pub text: String,
    pub status: MessageStatus,
    pub created_at: i64,
    pub stats: Option<ReplyStats>,
    /// The tool calls of a turn with tools, in order (none for a plain reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<chat::ToolTurnCall>>,
    /// The pictures attached to a user's message, in order, each `{sha256, mimeType}` (read
    /// for display with the `picture` command); absent when it has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pictures: Vec<ImageRef>,
}

impl From<&Message> for MessageView {
    fn from(m: &Message) -> Self {
        MessageView {
            id: m.id.0,
            seq: m.seq,
            role: m.role,
            text: m.text.clone(),
            status: m.status,
            created_at: m.created_at,
            stats: m
                .timings
                .as_ref()
                .and_then(|t| stats_from_timings(t, m.status)),
            tool_calls: chat::manager::calls_of(m),
            pictures: m.images.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchSegment {
    pub text: String,
    pub hit: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHitView {
    pub conversation_id: String,
    pub conversation_title: String,
    pub message_id: Option<i64>,
    pub seq: Option<i64>,
    pub role: Option<Role>,
    pub segments: Vec<SearchSegment>,
}

impl From<SearchHit> for SearchHitView {
    fn from(hit: SearchHit) -> Self {
        SearchHitView {
            segments: segments(&hit.snippet, &hit.highlights),
            conversation_id: hit.conversation_id.0,
            conversation_title: hit.conversation_title,
            message_id: hit.message_id.map(|m| m.0),
            seq: hit.seq,
            role: hit.role,
        }
    }
}

/// Cut `text` at the byte ranges the store highlighted, so the webview (whose strings count
/// UTF-16 units, not bytes) never has to map offsets. Ranges off a character boundary, out of
/// order or out of bounds are skipped rather than trusted.
pub fn segments(text: &str, highlights: &[(usize, usize)]) -> Vec<SearchSegment> {
    let mut out = Vec::new();
    let mut at = 0;
    for &(start, end) in highlights {
        if start < at || end <= start || end > text.len() {
            continue;
        }
        if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
            continue;
        }
        if start > at {
            out.push(SearchSegment {
                text: text[at..start].to_string(),
                hit: false,
            });
        }
        out.push(SearchSegment {
            text: text[start..end].to_string(),
            hit: true,
        });
        at = end;
    }
    if at < text.len() {
        out.push(SearchSegment {
            text: text[at..].to_string(),
            hit: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(segs: &[SearchSegment]) -> String {
        segs.iter()
            .map(|s| {
                if s.hit {
                    format!("[{}]", s.text)
                } else {
                    s.text.clone()
                }
            })
            .collect()
    }

    #[test]
    fn highlights_split_the_snippet() {
        let text = "the 滑动 window slides";
        let start = text.find("滑动").unwrap();
        let slides = text.find("slides").unwrap();
        let segs = segments(text, &[(start, start + "滑动".len()), (slides, text.len())]);
        assert_eq!(show(&segs), "the [滑动] window [slides]");
    }

    #[test]
    fn bad_ranges_are_skipped() {
        let text = "é abc";
        // 1 is inside 'é'; (9, 12) is out of bounds; (3, 2) is reversed
        let segs = segments(text, &[(1, 3), (3, 6), (9, 12), (3, 2)]);
        assert_eq!(show(&segs), "é [abc]");
        assert_eq!(show(&segments("", &[])), "");
    }

    #[test]
    fn stored_timings_give_back_the_reply_stats() {
        let stats = GenerationStats {
            prompt_tokens: 10,
            time_to_first_token_seconds: 0.05,
            generated_tokens: 3,
            decode_tokens_per_second: 60.0,
            ..GenerationStats::default()
        };
        let t = serde_json::to_value(&stats).unwrap();
        let back = stats_from_timings(&t, MessageStatus::Stopped).unwrap();
        assert_eq!(back, ReplyStats::new(&stats, StopReason::Cancelled));
        assert_eq!(back.time_to_first_token_ms, 50.0);
        assert!(stats_from_timings(&serde_json::json!("x"), MessageStatus::Complete).is_none());
    }
}
