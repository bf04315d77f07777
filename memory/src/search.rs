//! Full-text search over messages and conversation titles with SQLite FTS5.
//!
//! FTS5's `unicode61` tokenizer splits on spaces and punctuation, which Chinese and Japanese
//! text does not use between words: a whole sentence would be one token and a word inside it
//! could never match. So CJK characters are indexed one per token (text is segmented before it
//! is indexed), and a CJK query term becomes a phrase of its characters, which matches them
//! adjacent and in order — the unigram approach of SQLite's own trigram-less CJK indexing
//! advice, and it finds one- and two-character words that the `trigram` tokenizer cannot.
//! Snippets are cut from the original text, not from the segmented copy.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::store::Store;
use crate::types::{ConversationId, MessageId, Role};

/// Characters around the first match in a snippet.
const SNIPPET_CONTEXT_CHARS: usize = 48;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub conversation_id: ConversationId,
    pub conversation_title: String,
    /// The matching message; `None` when the title matched.
    pub message_id: Option<MessageId>,
    pub seq: Option<i64>,
    pub role: Option<Role>,
    /// A piece of the matching text around the first match.
    pub snippet: String,
    /// Byte ranges of `snippet` that match query terms.
    pub highlights: Vec<(usize, usize)>,
}

/// Han ideographs (with extensions and compatibility forms), kana, and CJK punctuation-free
/// symbols: scripts written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B–F, Compatibility Supplement
}

/// `text` with a space on each side of every CJK character, for the index.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The words of a query: CJK characters one by one, other runs of letters and digits whole.
fn query_tokens(term: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in term.chars() {
        if is_cjk(c) {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            tokens.push(c.to_string());
        } else if c.is_alphanumeric() {
            word.push(c);
        } else if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

/// What to highlight in a snippet: the query's words, with runs of CJK characters kept
/// together (a CJK term matches only as a whole), lowercased.
pub(crate) fn highlight_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for term in query.split_whitespace() {
        let mut run = String::new();
        for token in query_tokens(term) {
            if token.chars().all(is_cjk) {
                run.push_str(&token);
            } else {
                if !run.is_empty() {
                    terms.push(std::mem::take(&mut run));
                }
                terms.push(token.to_lowercase());
            }
        }
        if !run.is_empty() {
            terms.push(run);
        }
    }
    // longest first, so a longer term wins where two start at the same place
    terms.sort_by_key(|t| std::cmp::Reverse(t.len()));
    terms
}

/// An FTS5 query that matches every whitespace-separated term of `query` (each as a phrase);
/// the last term also matches as a prefix when it ends in a letter, for search as you type.
/// `None` when the query has no searchable characters.
pub fn fts_query(query: &str) -> Option<String> {
    let terms: Vec<Vec<String>> = query
        .split_whitespace()
        .map(query_tokens)
        .filter(|t| !t.is_empty())
        .collect();
    let last = terms.len().checked_sub(1)?;
    let parts: Vec<String> = terms
        .iter()
        .enumerate()
        .map(|(i, tokens)| {
            // tokens hold only letters and digits: no quote to escape
            let phrase = format!("\"{}\"", tokens.join(" "));
            let ends_in_word = tokens
                .last()
                .and_then(|t| t.chars().last())
                .is_some_and(|c| !is_cjk(c));
            if i == last && ends_in_word {
                format!("{phrase}*")
            } else {
                phrase
            }
        })
        .collect();
    Some(parts.join(" "))
}

pub(crate) fn index_message(
    tx: &rusqlite::Transaction<'_>,
    conversation: &ConversationId,
    id: MessageId,
    text: &str,
) -> Result<()> {
    tx.execute(
        "DELETE FROM search_index WHERE kind = 'message' AND message_id = ?1",
        [id.0],
    )?;
    tx.execute(
        "INSERT INTO search_index (body, kind, conversation_id, message_id)
         VALUES (?1, 'message', ?2, ?3)",
        params![segment(text), conversation.as_str(), id.0],
    )?;
    Ok(())
}

pub(crate) fn index_title(
    tx: &rusqlite::Transaction<'_>,
    conversation: &ConversationId,
    title: &str,
) -> Result<()> {
    tx.execute(
        "DELETE FROM search_index WHERE kind = 'title' AND conversation_id = ?1",
        [conversation.as_str()],
    )?;
    tx.execute(
        "INSERT INTO search_index (body, kind, conversation_id, message_id)
         VALUES (?1, 'title', ?2, NULL)",
        params![segment(title), conversation.as_str()],
    )?;
    Ok(())
}

/// Build the index from every finished message and every title (schema upgrade to v2).
pub(crate) fn reindex_all(conn: &rusqlite::Connection) -> Result<()> {
    conn.execute("DELETE FROM search_index", [])?;
    let mut insert = conn.prepare(
        "INSERT INTO search_index (body, kind, conversation_id, message_id) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut titles = conn.prepare("SELECT id, title FROM conversations")?;
    let mut rows = titles.query([])?;
    while let Some(r) = rows.next()? {
        let (id, title): (String, String) = (r.get(0)?, r.get(1)?);
        insert.execute(params![segment(&title), "title", id, Option::<i64>::None])?;
    }
    let mut messages =
        conn.prepare("SELECT id, conversation_id, text FROM messages WHERE status != 'streaming'")?;
    let mut rows = messages.query([])?;
    while let Some(r) = rows.next()? {
        let (id, conversation, text): (i64, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
        insert.execute(params![segment(&text), "message", conversation, id])?;
    }
    Ok(())
}

impl Store {
    /// Messages and titles matching every term of `query`, best first.
    pub fn search(&self, query: &str, limit: i64) -> Result<Vec<SearchHit>> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let terms = highlight_terms(query);
        let mut stmt = self.conn.prepare(
            "SELECT s.conversation_id, c.title, s.message_id, m.seq, m.role, m.text
             FROM search_index s
             JOIN conversations c ON c.id = s.conversation_id
             LEFT JOIN messages m ON m.id = s.message_id
             WHERE search_index MATCH ?1
             ORDER BY rank
             LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![fts, limit.max(0)], |r| {
            let title: String = r.get(1)?;
            let role: Option<String> = r.get(4)?;
            let text: Option<String> = r.get(5)?;
            Ok((
                ConversationId(r.get(0)?),
                title,
                r.get::<_, Option<i64>>(2)?.map(MessageId),
                r.get::<_, Option<i64>>(3)?,
                role.and_then(|r| Role::parse(&r)),
                text,
            ))
        })?;
        let mut hits = Vec::new();
        for row in rows {
            let (conversation_id, conversation_title, message_id, seq, role, text) = row?;
            let source = text.as_deref().unwrap_or(&conversation_title);
            let (snippet, highlights) = snippet(source, &terms);
            hits.push(SearchHit {
                conversation_id,
                conversation_title,
                message_id,
                seq,
                role,
                snippet,
                highlights,
            });
        }
        Ok(hits)
    }
}

/// A window of `text` around the first occurrence of any term (case-insensitive), with the
/// byte ranges of every term occurrence inside it.
pub fn snippet(text: &str, terms: &[String]) -> (String, Vec<(usize, usize)>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let lower: Vec<String> = chars
        .iter()
        .map(|(_, c)| c.to_lowercase().collect())
        .collect();
    // positions (in chars) where a term starts, and its length in chars
    let mut matches: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let found = terms.iter().filter(|t| !t.is_empty()).find_map(|t| {
            let mut joined = String::new();
            let mut n = 0;
            while joined.len() < t.len() && i + n < chars.len() {
                joined.push_str(&lower[i + n]);
                n += 1;
            }
            (joined == *t).then_some(n)
        });
        match found {
            Some(n) => {
                matches.push((i, n));
                i += n;
            }
            None => i += 1,
        }
    }
    let first = matches.first().map_or(0, |m| m.0);
    let start = first.saturating_sub(SNIPPET_CONTEXT_CHARS);
    let end = (first + SNIPPET_CONTEXT_CHARS * 2).min(chars.len());
    let byte = |c: usize| chars.get(c).map_or(text.len(), |x| x.0);
    let (b0, b1) = (byte(start), byte(end));
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let offset = out.len();
    out.push_str(&text[b0..b1].replace('\n', " "));
    if end < chars.len() {
        out.push('…');
    }
    let highlights = matches
        .iter()
        .filter(|(s, n)| *s >= start && s + n <= end)
        .map(|(s, n)| (byte(*s) - b0 + offset, byte(s + n) - b0 + offset))
        .collect();
    (out, highlights)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_is_indexed_one_character_per_token() {
        assert_eq!(segment("我爱Rust语言"), " 我  爱 Rust 语  言 ");
        assert_eq!(segment("plain text"), "plain text");
    }

    #[test]
    fn queries_become_phrases_with_a_prefix_on_the_last_word() {
        assert_eq!(
            fts_query("天气 forecast").as_deref(),
            Some("\"天 气\" \"forecast\"*")
        );
        assert_eq!(fts_query("天气").as_deref(), Some("\"天 气\""));
        assert_eq!(
            fts_query("\"quoted\" AND"),
            Some("\"quoted\" \"AND\"*".into())
        );
        assert_eq!(fts_query("  ?! "), None);
    }

    #[test]
    fn snippets_are_cut_from_the_original_text_with_highlights() {
        let text = "a".repeat(100) + " Weather today 天气很好";
        let (s, h) = snippet(&text, &["weather".into(), "天".into()]);
        assert!(s.starts_with('…'));
        assert_eq!(h.len(), 2);
        assert_eq!(&s[h[0].0..h[0].1], "Weather");
        assert_eq!(&s[h[1].0..h[1].1], "天");
    }
}
