//! A Gemma 4 model's multi-token-prediction assistant, paired with the model in the library:
//! at most one per model, forgotten with it (`ON DELETE CASCADE`). Which model an assistant
//! fits is the glue's to decide (it reads both files, chat/); this crate keeps the pairing.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use super::models::ModelId;
use crate::error::Result;
use crate::types::now_ms;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantRecord {
    pub model_id: ModelId,
    /// Where the library keeps the file (absolute).
    pub path: String,
    /// Lowercase hex.
    pub sha256: String,
    pub file_bytes: u64,
    pub added_at: i64,
}

const SELECT: &str = "SELECT model_id, path, sha256, file_bytes, added_at FROM model_assistants";

fn assistant(row: &rusqlite::Row<'_>) -> rusqlite::Result<AssistantRecord> {
    Ok(AssistantRecord {
        model_id: ModelId(row.get(0)?),
        path: row.get(1)?,
        sha256: row.get(2)?,
        file_bytes: row.get::<_, i64>(3)? as u64,
        added_at: row.get(4)?,
    })
}

impl Store {
    /// Pair an assistant file with `model`, in place of the one paired before, which is
    /// returned (the caller deletes its file when no other model uses it).
    pub fn pair_assistant(
        &self,
        model: ModelId,
        path: &str,
        sha256: &str,
        file_bytes: u64,
    ) -> Result<(AssistantRecord, Option<AssistantRecord>)> {
        self.model(model)?;
        self.in_transaction(|tx| {
            let before = tx
                .query_row(&format!("{SELECT} WHERE model_id = ?1"), [model.0], assistant)
                .optional()?;
            tx.execute(
                "INSERT OR REPLACE INTO model_assistants (model_id, path, sha256, file_bytes, added_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![model.0, path, sha256, file_bytes as i64, now_ms()],
            )?;
            let now = tx.query_row(&format!("{SELECT} WHERE model_id = ?1"), [model.0], assistant)?;
            Ok((now, before))
        })
    }

    /// The assistant paired with `model`, if any.
    pub fn assistant_of(&self, model: ModelId) -> Result<Option<AssistantRecord>> {
        Ok(self
            .conn
            .query_row(
                &format!("{SELECT} WHERE model_id = ?1"),
                [model.0],
                assistant,
            )
            .optional()?)
    }

    /// Every pairing (files the library keeps besides its models).
    pub fn assistants(&self) -> Result<Vec<AssistantRecord>> {
        let mut stmt = self.conn.prepare(&format!("{SELECT} ORDER BY model_id"))?;
        let rows = stmt.query_map([], assistant)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
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
    fn one_assistant_per_model_replaced_and_gone_with_the_model() {
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
        store.set_model_in_use(b.id).unwrap();
        store.remove_model(a.id).unwrap();
        assert!(store.assistant_of(a.id).unwrap().is_none());
        assert!(store.assistants().unwrap().is_empty());
    }
}
