//! The schema and its upgrades, versioned with `PRAGMA user_version` as mozilla's
//! application-services does: a fresh database runs every step from 0, an older one runs the
//! steps it lacks, one version at a time, each in its own transaction; a database newer than
//! this code is refused and left untouched. Each step's SQL is frozen once released: change the
//! schema by adding a step, never by editing one (tests/fixtures holds copies of old schemas).

use rusqlite::Connection;

use crate::error::{Error, Result};

/// The schema version this code writes.
pub const SCHEMA_VERSION: i64 = 11;

/// Version 1: conversations, messages, L2 summaries and KV snapshot records.
const V1: &str = "
CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    model       TEXT,
    settings    TEXT NOT NULL DEFAULT '{}',
    pinned      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX conversations_by_recency ON conversations (pinned DESC, updated_at DESC);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    text            TEXT NOT NULL,
    token_count     INTEGER,
    status          TEXT NOT NULL CHECK (status IN ('streaming', 'complete', 'stopped', 'error')),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    timings         TEXT,
    UNIQUE (conversation_id, seq)
);

CREATE TABLE summaries (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    first_seq       INTEGER NOT NULL,
    last_seq        INTEGER NOT NULL,
    text            TEXT NOT NULL,
    token_count     INTEGER NOT NULL,
    model           TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    CHECK (first_seq <= last_seq)
);
CREATE INDEX summaries_by_conversation ON summaries (conversation_id, first_seq);

CREATE TABLE kv_snapshots (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    model_sha256    TEXT NOT NULL,
    format_version  INTEGER NOT NULL,
    token_count     INTEGER NOT NULL,
    byte_count      INTEGER NOT NULL,
    file            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    last_used_at    INTEGER NOT NULL
);
";

/// Version 2: full-text search over messages and titles (FTS5; CJK text is indexed one
/// character per token, see `search.rs`), and documents with their chunk summaries.
const V2: &str = "
CREATE VIRTUAL TABLE search_index USING fts5 (
    body,
    kind UNINDEXED,
    conversation_id UNINDEXED,
    message_id UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE documents (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    byte_count  INTEGER NOT NULL,
    model       TEXT NOT NULL,
    settings    TEXT NOT NULL DEFAULT '{}',
    chunk_count INTEGER,
    summary     TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (sha256, model, settings)
);

CREATE TABLE document_chunks (
    document_id  INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    level        INTEGER NOT NULL,
    idx          INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    summary      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (document_id, level, idx)
);
";

/// Version 3: the local agent's tables — notes (full-text searchable like messages, CJK one
/// character per token), reminders, the folders the user granted, and the audit log of every
/// tool call.
const V3: &str = "
CREATE TABLE notes (
    id              INTEGER PRIMARY KEY,
    title           TEXT NOT NULL,
    text            TEXT NOT NULL,
    conversation_id TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE VIRTUAL TABLE notes_index USING fts5 (
    body,
    note_id UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE reminders (
    id              INTEGER PRIMARY KEY,
    text            TEXT NOT NULL,
    due_at          INTEGER NOT NULL,
    conversation_id TEXT,
    created_at      INTEGER NOT NULL,
    notified_at     INTEGER,
    done_at         INTEGER
);
CREATE INDEX reminders_by_due ON reminders (due_at);

CREATE TABLE folder_grants (
    path      TEXT PRIMARY KEY,
    mode      TEXT NOT NULL CHECK (mode IN ('read', 'write')),
    added_at  INTEGER NOT NULL
);

CREATE TABLE tool_calls (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'denied')),
    error_code      TEXT,
    duration_ms     INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX tool_calls_by_time ON tool_calls (created_at, id);
CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation_id, created_at);
";

/// Version 4: the writer (see `writers.rs`) of a reply while it streams, so that only a reply
/// whose writer is gone is taken as abandoned. Rows from before have none.
const V4: &str = "
ALTER TABLE messages ADD COLUMN writer TEXT;
";

/// Version 5: the model library — every model file the user imported, with its fingerprint
/// and its version among the files of the same name; the one in use is the one most recently
/// chosen (`used_at`), the one before it what a failed switch goes back to. Conversations
/// record the sha256 of the model their turns were made with.
const V5: &str = "
CREATE TABLE models (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    path          TEXT NOT NULL,
    architecture  TEXT NOT NULL,
    parameters    INTEGER NOT NULL,
    quantization  TEXT NOT NULL,
    file_bytes    INTEGER NOT NULL,
    sha256        TEXT NOT NULL UNIQUE,
    source        TEXT NOT NULL,
    added_at      INTEGER NOT NULL,
    used_at       INTEGER,
    UNIQUE (name, version)
);
ALTER TABLE conversations ADD COLUMN model_sha256 TEXT;
";

/// Version 6: what the iPhone needs. A folder picked through iOS's document picker is reached
/// only through its security-scoped bookmark (resolved at every use: the user can move or
/// revoke it); a reminder the agent created is also in the Reminders app, under EventKit's
/// identifier.
const V6: &str = "
ALTER TABLE folder_grants ADD COLUMN bookmark BLOB;
ALTER TABLE reminders ADD COLUMN external_id TEXT;
";

/// Version 7: sync through a folder (see `crate::sync`). Rows that sync get a stable `uid`
/// (conversations already have one); every change made on this device stamps the changed
/// field with the device's hybrid logical clock in `sync_clocks`, by triggers, so no write
/// path can forget it; `applying` is set only inside the transaction that applies another
/// device's changes, which are not stamped again. `~` is the field of a deletion (a
/// tombstone). The clock is milliseconds << 16 plus a counter (Kulkarni et al., "Logical
/// Physical Clocks", 2014), advanced past every clock seen.
const V7: &str = "
ALTER TABLE messages ADD COLUMN uid TEXT;
ALTER TABLE summaries ADD COLUMN uid TEXT;
ALTER TABLE notes ADD COLUMN uid TEXT;
ALTER TABLE reminders ADD COLUMN uid TEXT;
ALTER TABLE tool_calls ADD COLUMN uid TEXT;
UPDATE messages SET uid = lower(hex(randomblob(16)));
UPDATE summaries SET uid = lower(hex(randomblob(16)));
UPDATE notes SET uid = lower(hex(randomblob(16)));
UPDATE reminders SET uid = lower(hex(randomblob(16)));
UPDATE tool_calls SET uid = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX messages_by_uid ON messages (uid);
CREATE UNIQUE INDEX summaries_by_uid ON summaries (uid);
CREATE UNIQUE INDEX notes_by_uid ON notes (uid);
CREATE UNIQUE INDEX reminders_by_uid ON reminders (uid);
CREATE UNIQUE INDEX tool_calls_by_uid ON tool_calls (uid);

CREATE TABLE sync_state (
    only          INTEGER PRIMARY KEY CHECK (only = 0),
    device        TEXT NOT NULL,
    clock         INTEGER NOT NULL,
    applying      INTEGER NOT NULL DEFAULT 0,
    exported      INTEGER NOT NULL DEFAULT 0,
    next_segment  INTEGER NOT NULL DEFAULT 1,
    folder        TEXT,
    last_round_at INTEGER,
    last_error    TEXT
);
INSERT INTO sync_state (only, device, clock) VALUES (0, lower(hex(randomblob(8))), 0);

CREATE TABLE sync_clocks (
    kind   TEXT NOT NULL,
    uid    TEXT NOT NULL,
    field  TEXT NOT NULL,
    hlc    INTEGER NOT NULL,
    device TEXT NOT NULL,
    PRIMARY KEY (kind, uid, field)
) WITHOUT ROWID;
CREATE INDEX sync_clocks_by_device ON sync_clocks (device, hlc);

CREATE TABLE sync_peers (
    device   TEXT PRIMARY KEY,
    through  INTEGER NOT NULL DEFAULT 0,
    seen_at  INTEGER
);
CREATE TABLE sync_applied (
    device  TEXT NOT NULL,
    segment INTEGER NOT NULL,
    PRIMARY KEY (device, segment)
) WITHOUT ROWID;
CREATE TABLE sync_pending (
    parent TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (parent, record)
) WITHOUT ROWID;
CREATE TABLE sync_outgoing (
    name  TEXT PRIMARY KEY,
    bytes BLOB NOT NULL
);

CREATE TRIGGER sync_conversation_insert AFTER INSERT ON conversations
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', NEW.id, f.value, s.clock, s.device
        FROM sync_state s, json_each('[\"created\",\"title\",\"pinned\",\"settings\"]') f;
END;
CREATE TRIGGER sync_conversation_title AFTER UPDATE OF title ON conversations
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', NEW.id, 'title', clock, device
        FROM sync_state;
END;
CREATE TRIGGER sync_conversation_pinned AFTER UPDATE OF pinned ON conversations
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', NEW.id, 'pinned', clock, device
        FROM sync_state;
END;
CREATE TRIGGER sync_conversation_settings AFTER UPDATE OF settings ON conversations
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', NEW.id, 'settings', clock, device
        FROM sync_state;
END;
CREATE TRIGGER sync_conversation_delete AFTER DELETE ON conversations
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', OLD.id, '~', clock, device
        FROM sync_state;
END;

CREATE TRIGGER sync_message_insert AFTER INSERT ON messages
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE messages SET uid = lower(hex(randomblob(16))) WHERE id = NEW.id AND uid IS NULL;
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks
        SELECT 'message', m.uid, f.value, s.clock, s.device
        FROM sync_state s, messages m, json_each('[\"created\",\"body\"]') f WHERE m.id = NEW.id;
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', NEW.conversation_id, 'activity',
        clock, device FROM sync_state;
END;
CREATE TRIGGER sync_message_body AFTER UPDATE OF text, status ON messages
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'message', NEW.uid, 'body', clock, device
        FROM sync_state WHERE NEW.uid IS NOT NULL;
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', NEW.conversation_id, 'activity',
        clock, device FROM sync_state;
END;
CREATE TRIGGER sync_message_delete AFTER DELETE ON messages
WHEN (SELECT applying FROM sync_state) = 0
    AND EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id) BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'message', OLD.uid, '~', clock, device
        FROM sync_state WHERE OLD.uid IS NOT NULL;
    INSERT OR REPLACE INTO sync_clocks SELECT 'conversation', OLD.conversation_id, 'activity',
        clock, device FROM sync_state;
END;

CREATE TRIGGER sync_summary_insert AFTER INSERT ON summaries
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE summaries SET uid = lower(hex(randomblob(16))) WHERE id = NEW.id AND uid IS NULL;
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'summary', m.uid, 'created', s.clock, s.device
        FROM sync_state s, summaries m WHERE m.id = NEW.id;
END;
CREATE TRIGGER sync_summary_delete AFTER DELETE ON summaries
WHEN (SELECT applying FROM sync_state) = 0
    AND EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id) BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'summary', OLD.uid, '~', clock, device
        FROM sync_state WHERE OLD.uid IS NOT NULL;
END;

CREATE TRIGGER sync_note_insert AFTER INSERT ON notes
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE notes SET uid = lower(hex(randomblob(16))) WHERE id = NEW.id AND uid IS NULL;
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'note', m.uid, f.value, s.clock, s.device
        FROM sync_state s, notes m, json_each('[\"created\",\"title\",\"text\"]') f
        WHERE m.id = NEW.id;
END;
CREATE TRIGGER sync_note_title AFTER UPDATE OF title ON notes
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'note', NEW.uid, 'title', clock, device
        FROM sync_state WHERE NEW.uid IS NOT NULL;
END;
CREATE TRIGGER sync_note_text AFTER UPDATE OF text ON notes
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'note', NEW.uid, 'text', clock, device
        FROM sync_state WHERE NEW.uid IS NOT NULL;
END;
CREATE TRIGGER sync_note_delete AFTER DELETE ON notes
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'note', OLD.uid, '~', clock, device
        FROM sync_state WHERE OLD.uid IS NOT NULL;
END;

CREATE TRIGGER sync_reminder_insert AFTER INSERT ON reminders
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE reminders SET uid = lower(hex(randomblob(16))) WHERE id = NEW.id AND uid IS NULL;
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'reminder', m.uid, f.value, s.clock, s.device
        FROM sync_state s, reminders m, json_each('[\"created\",\"state\"]') f
        WHERE m.id = NEW.id;
END;
CREATE TRIGGER sync_reminder_state AFTER UPDATE OF notified_at, done_at ON reminders
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'reminder', NEW.uid, 'state', clock, device
        FROM sync_state WHERE NEW.uid IS NOT NULL;
END;
CREATE TRIGGER sync_reminder_delete AFTER DELETE ON reminders
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'reminder', OLD.uid, '~', clock, device
        FROM sync_state WHERE OLD.uid IS NOT NULL;
END;

CREATE TRIGGER sync_tool_call_insert AFTER INSERT ON tool_calls
WHEN (SELECT applying FROM sync_state) = 0 BEGIN
    UPDATE tool_calls SET uid = lower(hex(randomblob(16))) WHERE id = NEW.id AND uid IS NULL;
    UPDATE sync_state SET clock = max(clock + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536);
    INSERT OR REPLACE INTO sync_clocks SELECT 'tool_call', m.uid, 'created', s.clock, s.device
        FROM sync_state s, tool_calls m WHERE m.id = NEW.id;
END;
";

/// Version 8: the marks of this database's last two `progress.json` writes in the sync folder
/// (`crate::sync::identity`): a mark there that is neither shows another copy of the
/// database writing under its device id.
const V8: &str = "
ALTER TABLE sync_state ADD COLUMN progress_marks TEXT NOT NULL DEFAULT '';
";

/// Version 9: a Gemma 4 model's multi-token-prediction assistant, paired with it in the
/// library (a file beside the model's, at most one per model; it goes with the model).
const V9: &str = "
CREATE TABLE model_assistants (
    model_id      INTEGER PRIMARY KEY REFERENCES models (id) ON DELETE CASCADE,
    path          TEXT NOT NULL,
    sha256        TEXT NOT NULL,
    file_bytes    INTEGER NOT NULL,
    added_at      INTEGER NOT NULL
);
";

/// Version 10: a model's vision projector (an `mmproj` file), paired with it in the library
/// as an assistant is (at most one per model; it goes with the model).
const V10: &str = "
CREATE TABLE model_projectors (
    model_id      INTEGER PRIMARY KEY REFERENCES models (id) ON DELETE CASCADE,
    path          TEXT NOT NULL,
    sha256        TEXT NOT NULL,
    file_bytes    INTEGER NOT NULL,
    added_at      INTEGER NOT NULL
);
";

/// Version 11: pictures attached to messages. The bytes are files in a folder beside the
/// database, named by their sha256 (`images.rs`); a row here per picture kept, and a link per
/// attachment, in the order the pictures were attached. A picture no message links to any
/// more is deleted with its file. The index serves that question and the foreign key's check
/// when an `images` row is deleted.
const V11: &str = "
CREATE TABLE images (
    sha256      TEXT PRIMARY KEY,
    mime        TEXT NOT NULL,
    byte_count  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE message_images (
    message_id  INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    sha256      TEXT NOT NULL REFERENCES images (sha256),
    PRIMARY KEY (message_id, position)
);
CREATE INDEX message_images_by_image ON message_images (sha256);
";

/// One upgrade step: SQL, then Rust for what SQL cannot do (filling a new index).
struct Step {
    sql: &'static str,
    after: Option<fn(&Connection) -> Result<()>>,
}

const STEPS: [Step; SCHEMA_VERSION as usize] = [
    Step {
        sql: V1,
        after: None,
    },
    Step {
        sql: V2,
        after: Some(crate::search::reindex_all),
    },
    Step {
        sql: V3,
        after: None,
    },
    Step {
        sql: V4,
        after: None,
    },
    Step {
        sql: V5,
        after: None,
    },
    Step {
        sql: V6,
        after: None,
    },
    Step {
        sql: V7,
        after: Some(crate::sync::stamp_existing_rows),
    },
    Step {
        sql: V8,
        after: None,
    },
    Step {
        sql: V9,
        after: None,
    },
    Step {
        sql: V10,
        after: None,
    },
    Step {
        sql: V11,
        after: None,
    },
];

pub fn user_version(conn: &Connection) -> Result<i64> {
    Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
}

/// Bring the schema to [`SCHEMA_VERSION`]; refuse a newer one without touching it.
pub fn migrate(conn: &mut Connection, path: &std::path::Path) -> Result<()> {
    let found = user_version(conn)?;
    if found < 0 {
        return Err(Error::InvalidArgument(format!(
            "{} has an invalid schema version {found}",
            path.display()
        )));
    }
    if found > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for version in found..SCHEMA_VERSION {
        let step = &STEPS[version as usize];
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // another process may have run this step while we waited for the write lock
        if user_version(&tx)? > version {
            continue;
        }
        tx.execute_batch(step.sql)?;
        if let Some(after) = step.after {
            after(&tx)?;
        }
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
        tracing::info!(
            from = version,
            to = version + 1,
            "conversation database upgraded"
        );
    }
    Ok(())
}
