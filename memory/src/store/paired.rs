//! Files the library keeps beside a model, paired with it: a Gemma 4 model's
//! multi-token-prediction assistant and a model's vision projector (`mmproj`). At most one of
//! each per model, forgotten with it (`ON DELETE CASCADE`). Which model a file fits is the
//! glue's to decide (it reads both files, chat/); this crate keeps the pairing.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use super::models::ModelId;
use crate::error::Result;
use crate::types::now_ms;

/// What a paired file is to its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pairing {
    /// Gemma 4's multi-token-prediction assistant (drafts for the model).
    Assistant,
    /// A vision projector (reads pictures for the model).
    Projector,
}

impl Pairing {
    fn table(self) -> &'static str {
        match self {
            Pairing::Assistant => "model_assistants",
            Pairing::Projector => "model_projectors",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairedFile {
    pub model_id: ModelId,
    /// Where the library keeps the file (absolute).
    pub path: String,
    /// Lowercase hex.
    pub sha256: String,
    pub file_bytes: u64,
    pub added_at: i64,
}

/// A model's assistant.
pub type AssistantRecord = PairedFile;
/// A model's vision projector.
pub type ProjectorRecord = PairedFile;

fn select(kind: Pairing) -> String {
    format!(
        "SELECT model_id, path, sha256, file_bytes, added_at FROM {}",
        kind.table()
    )
}

fn paired(row: &rusqlite::Row<'_>) -> rusqlite::Result<PairedFile> {
    Ok(PairedFile {
        model_id: ModelId(row.get(0)?),
        path: row.get(1)?,
        sha256: row.get(2)?,
        file_bytes: row.get::<_, i64>(3)? as u64,
        added_at: row.get(4)?,
    })
}

impl Store {
    /// Pair a file with `model`, in place of the one of that kind paired before, which is
    /// returned (the caller deletes its file when no other model uses it).
    pub fn pair_file(
        &self,
        kind: Pairing,
        model: ModelId,
        path: &str,
        sha256: &str,
        file_bytes: u64,
    ) -> Result<(PairedFile, Option<PairedFile>)> {
        self.model(model)?;
        let one = format!("{} WHERE model_id = ?1", select(kind));
        self.in_transaction(|tx| {
            let before = tx.query_row(&one, [model.0], paired).optional()?;
            tx.execute(
                &format!(
                    "INSERT OR REPLACE INTO {} (model_id, path, sha256, file_bytes, added_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    kind.table()
                ),
                params![model.0, path, sha256, file_bytes as i64, now_ms()],
            )?;
            let now = tx.query_row(&one, [model.0], paired)?;
            Ok((now, before))
        })
    }

    /// The file of `kind` paired with `model`, if any.
    pub fn paired_file(&self, kind: Pairing, model: ModelId) -> Result<Option<PairedFile>> {
        Ok(self
            .conn
            .query_row(
                &format!("{} WHERE model_id = ?1", select(kind)),
                [model.0],
                paired,
            )
            .optional()?)
    }

    /// Every pairing of `kind` (files the library keeps besides its models).
    pub fn paired_files(&self, kind: Pairing) -> Result<Vec<PairedFile>> {
        let mut stmt = self
            .conn
            .prepare(&format!("{} ORDER BY model_id", select(kind)))?;
        let rows = stmt.query_map([], paired)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// [`Self::pair_file`] of an assistant.
    pub fn pair_assistant(
        &self,
        model: ModelId,
        path: &str,
        sha256: &str,
        file_bytes: u64,
    ) -> Result<(PairedFile, Option<PairedFile>)> {
        self.pair_file(Pairing::Assistant, model, path, sha256, file_bytes)
    }

    /// The assistant paired with `model`, if any.
    pub fn assistant_of(&self, model: ModelId) -> Result<Option<PairedFile>> {
        self.paired_file(Pairing::Assistant, model)
    }

    /// Every assistant pairing.
    pub fn assistants(&self) -> Result<Vec<PairedFile>> {
        self.paired_files(Pairing::Assistant)
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use crate::store::models::NewModel;

    fn model(store: &Store, name: &str, sha: char) -> crate::ModelRecord {
        store
            .add_model(&NewModel {
                name: name.into(),
                path: format!("/lib/{name}.gguf"),
                architecture: "gemma4".into(),
                parameters: 1,
                quantization: "Q8_0".into(),
                file_bytes: 10,
                sha256: sha.to_string().repeat(64),
                source: "/src".into(),
            })
            .unwrap()
            .0
    }

    #[test]
    fn one_file_of_each_kind_per_model_replaced_and_gone_with_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("c.db")).unwrap().store;
        let a = model(&store, "a", 'a');
        let b = model(&store, "b", 'b');
        assert!(store.assistant_of(a.id).unwrap().is_none());
        let (first, before) = store
            .pair_assistant(a.id, "/lib/x.gguf", &"c".repeat(64), 5)
            .unwrap();
        assert!(before.is_none());
        assert_eq!(first.path, "/lib/x.gguf");
        let (second, before) = store
            .pair_assistant(a.id, "/lib/y.gguf", &"d".repeat(64), 6)
            .unwrap();
        assert_eq!(before.unwrap().path, "/lib/x.gguf");
        assert_eq!(store.assistant_of(a.id).unwrap().unwrap(), second);
        assert!(
            store
                .pair_assistant(crate::ModelId(99), "/p", &"e".repeat(64), 1)
                .is_err()
        );
        // a projector is paired apart from the assistant
        let (p, before) = store
            .pair_file(
                super::Pairing::Projector,
                a.id,
                "/lib/p.gguf",
                &"f".repeat(64),
                7,
            )
            .unwrap();
        assert!(before.is_none());
        assert_eq!(
            store.paired_file(super::Pairing::Projector, a.id).unwrap(),
            Some(p)
        );
        assert_eq!(store.assistant_of(a.id).unwrap().unwrap(), second);
        store.set_model_in_use(b.id).unwrap();
        store.remove_model(a.id).unwrap();
        assert!(store.assistant_of(a.id).unwrap().is_none());
        assert!(store.assistants().unwrap().is_empty());
        assert!(
            store
                .paired_files(super::Pairing::Projector)
                .unwrap()
                .is_empty()
        );
    }
}
