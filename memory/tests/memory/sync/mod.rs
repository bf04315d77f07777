//! Sync through a folder: devices (stores) that write into their own view of a shared folder,
//! and a simulated cloud service that carries files between the views late, out of order,
//! twice (as conflict copies), half-written first, or not until the end.

mod convergence;
mod pictures;
mod races;
mod scenarios;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memory::{MessageStatus, NewMessage, Role, Store};

/// One device: its database and its view of the sync folder.
pub struct Device {
    pub store: Store,
    pub db: PathBuf,
    pub folder: PathBuf,
}

impl Device {
    pub fn new(dir: &Path, name: &str) -> Device {
        let db = dir.join(name).join("companion.db");
        let folder = dir.join(name).join("sync");
        std::fs::create_dir_all(&folder).unwrap();
        let store = Store::open(&db).unwrap().store;
        Device { store, db, folder }
    }

    pub fn round(&self) -> memory::SyncReport {
        self.store.sync_round(&self.folder).unwrap()
    }

    /// Move this device's clock ahead, as a device whose wall clock is wrong would have it.
    pub fn skew_clock(&self, ms: i64) {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.execute("UPDATE sync_state SET clock = clock + (?1 << 16)", [ms])
            .unwrap();
    }

    /// A new conversation with no model or settings.
    pub fn conversation(&self, title: &str) -> memory::Conversation {
        self.store
            .create_conversation(title, None, &serde_json::Value::Null)
            .unwrap()
    }

    pub fn append(&self, conversation: &memory::ConversationId, role: Role, text: &str) {
        self.store
            .append_message(conversation, &NewMessage::complete(role, text, None))
            .unwrap();
    }

    /// A reply generated and then finished (stopped or complete).
    pub fn reply(&self, conversation: &memory::ConversationId, text: &str, stopped: bool) {
        let id = self.store.begin_reply(conversation).unwrap();
        self.store
            .checkpoint_reply(id, &text[..text.len() / 2])
            .unwrap();
        let status = if stopped {
            MessageStatus::Stopped
        } else {
            MessageStatus::Complete
        };
        self.store
            .finish_reply(id, text, status, None, None)
            .unwrap();
    }

    /// What a user sees, read straight from the database.
    pub fn visible(&self) -> Visible {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        let rows = |sql: &str| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            stmt.query_map([], |r| {
                let mut parts = Vec::new();
                for i in 0..n {
                    let v: rusqlite::types::Value = r.get(i)?;
                    parts.push(format!("{v:?}"));
                }
                Ok(parts.join(" | "))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
        };
        Visible {
            conversations: rows(
                "SELECT id, title, pinned, settings, created_at, updated_at, model
                 FROM conversations ORDER BY id",
            ),
            messages: rows(
                "SELECT conversation_id, seq, uid, role, text, status, created_at
                 FROM messages ORDER BY conversation_id, seq",
            ),
            summaries: rows(
                "SELECT uid, conversation_id, first_seq, last_seq, text FROM summaries ORDER BY uid",
            ),
            notes: rows("SELECT uid, title, text, conversation_id FROM notes ORDER BY uid"),
            reminders: rows(
                "SELECT uid, text, due_at, notified_at, done_at FROM reminders ORDER BY uid",
            ),
            tool_calls: rows("SELECT uid, tool, arguments, outcome FROM tool_calls ORDER BY uid"),
            search: rows(
                "SELECT kind, conversation_id, body FROM search_index
                 ORDER BY kind, conversation_id, body",
            ),
        }
    }
}

/// The texts of a conversation's messages on `device`, in order.
pub fn texts(device: &Device, conversation: &memory::ConversationId) -> Vec<String> {
    device
        .store
        .messages(conversation)
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect()
}

/// Everything a user can see of the synced data (and the search index built from it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visible {
    pub conversations: Vec<String>,
    pub messages: Vec<String>,
    pub summaries: Vec<String>,
    pub notes: Vec<String>,
    pub reminders: Vec<String>,
    pub tool_calls: Vec<String>,
    pub search: Vec<String>,
}

/// A tiny seeded generator (SplitMix64), for the cloud's whims.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Every file of a folder view, by path relative to it.
fn files(view: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let root = view.join("companion-sync");
    let Ok(devices) = std::fs::read_dir(&root) else {
        return out;
    };
    for d in devices.flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                continue;
            }
            let rel = PathBuf::from(d.file_name()).join(&name);
            out.insert(rel, std::fs::read(f.path()).unwrap());
        }
    }
    out
}

/// Carry each device's own files to the other views. With `faults`, a file may be left for
/// later, arrive half-written (completed on a later pass), or arrive twice (as "name 2.jsonl");
/// files a device deleted are deleted in the other views only sometimes.
pub fn carry(devices: &[&Device], rng: &mut Rng, faults: bool) {
    for (i, from) in devices.iter().enumerate() {
        let own = from.store.sync_device().unwrap();
        let theirs: BTreeMap<PathBuf, Vec<u8>> = files(&from.folder)
            .into_iter()
            .filter(|(p, _)| p.starts_with(&own))
            .collect();
        for (j, to) in devices.iter().enumerate() {
            if i == j {
                continue;
            }
            let dest_root = to.folder.join("companion-sync");
            for (rel, bytes) in &theirs {
                let dest = dest_root.join(rel);
                let current = std::fs::read(&dest).ok();
                if current.as_deref() == Some(bytes.as_slice()) {
                    continue;
                }
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                if faults && rng.chance(30) {
                    continue; // late
                }
                if faults && rng.chance(20) {
                    let cut = (rng.next() as usize) % bytes.len().max(1);
                    std::fs::write(&dest, &bytes[..cut]).unwrap(); // half-written
                    continue;
                }
                std::fs::write(&dest, bytes).unwrap();
                if faults && rng.chance(15) && rel.extension().is_some_and(|e| e == "jsonl") {
                    let stem = rel.file_stem().unwrap().to_string_lossy();
                    let copy = dest.with_file_name(format!("{stem} 2.jsonl"));
                    std::fs::write(copy, bytes).unwrap(); // a conflict copy
                }
            }
            // files the writer deleted (folded into a snapshot)
            for (rel, _) in files(&to.folder) {
                if rel.starts_with(&own)
                    && !theirs.contains_key(&rel)
                    && !rel.to_string_lossy().contains(" 2.")
                    && (!faults || rng.chance(50))
                {
                    std::fs::remove_file(dest_root.join(rel)).unwrap();
                }
            }
        }
    }
}

/// Deliver everything intact and run rounds until every device has applied every other's
/// changes.
pub fn settle(devices: &[&Device], rng: &mut Rng) {
    for _ in 0..3 {
        for d in devices {
            d.round();
        }
        carry(devices, rng, false);
    }
    for d in devices {
        let report = d.round();
        assert!(report.notices.is_empty(), "{:?}", report.notices);
        assert_eq!(report.waiting, 0, "records still waiting for a parent");
    }
}
