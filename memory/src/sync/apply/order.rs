//! A file's records applied: messages put in the order of their creation stamps, so that
//! two devices that added to one conversation at once show the same order; summaries follow
//! their messages; KV snapshots whose messages changed underneath them are dropped.

use std::collections::HashMap;

use rusqlite::{Transaction, params};

use super::Effects;
use crate::error::Result;
use crate::types::ConversationId;

/// After a file's records: messages renumbered to their order (summaries follow their
/// messages), and the KV snapshots of conversations whose earlier messages changed dropped
/// (they are prefilled again from the messages, as after a model switch).
pub(crate) fn finish(tx: &Transaction<'_>, fx: &mut Effects) -> Result<()> {
    let reorder: Vec<String> = fx.reorder.drain().collect();
    for conversation in reorder {
        if renumber(tx, &conversation)? {
            fx.stale_snapshots.insert(conversation);
        }
    }
    let stale: Vec<String> = fx.stale_snapshots.drain().collect();
    for conversation in stale {
        if let Some(file) =
            crate::store::take_snapshot_row(tx, &ConversationId(conversation.clone()))?
        {
            fx.files_to_remove.push(file);
        }
    }
    Ok(())
}

/// Give the conversation's messages `seq` 0, 1, … in the order of their creation stamps;
/// `true` when any had to move (or a deletion left a gap), which makes its KV snapshot stale.
pub(super) fn renumber(tx: &Transaction<'_>, conversation: &str) -> Result<bool> {
    let rows: Vec<(i64, i64, i64, String, String)> = {
        let mut stmt = tx.prepare(
            "SELECT m.id, m.seq, coalesce(c.hlc, 0), coalesce(c.device, ''), coalesce(m.uid, '')
             FROM messages m
             LEFT JOIN sync_clocks c ON c.kind = 'message' AND c.uid = m.uid AND c.field = 'created'
             WHERE m.conversation_id = ?1",
        )?;
        let rows = stmt.query_map([conversation], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut ordered = rows.clone();
    // one database never gives two changes one stamp; two copies of it can, until one takes
    // a new id (`sync::identity`): the uid then decides, the same everywhere
    ordered.sort_by(|a, b| (a.2, &a.3, &a.4, a.1).cmp(&(b.2, &b.3, &b.4, b.1)));
    if ordered.iter().enumerate().all(|(i, r)| r.1 == i as i64) {
        return Ok(false);
    }
    let summaries: Vec<(i64, i64, i64)> = {
        let mut stmt = tx.prepare(
            "SELECT s.id, f.id, l.id FROM summaries s
             JOIN messages f ON f.conversation_id = s.conversation_id AND f.seq = s.first_seq
             JOIN messages l ON l.conversation_id = s.conversation_id AND l.seq = s.last_seq
             WHERE s.conversation_id = ?1",
        )?;
        let rows = stmt.query_map([conversation], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (rank, row) in ordered.iter().enumerate() {
        tx.execute(
            "UPDATE messages SET seq = ?2 WHERE id = ?1",
            params![row.0, -(rank as i64) - 1],
        )?;
    }
    tx.execute(
        "UPDATE messages SET seq = -seq - 1 WHERE conversation_id = ?1",
        [conversation],
    )?;
    let rank_of: HashMap<i64, i64> = ordered
        .iter()
        .enumerate()
        .map(|(i, r)| (r.0, i as i64))
        .collect();
    for (id, first, last) in summaries {
        tx.execute(
            "UPDATE summaries SET first_seq = ?2, last_seq = ?3 WHERE id = ?1",
            params![id, rank_of[&first], rank_of[&last]],
        )?;
    }
    Ok(true)
}
