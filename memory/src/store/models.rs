//! The model library: the model files the user imported, as rows the CLI's `companion models`
//! and the app's model panel list. The store keeps facts the glue measured (sha256, size,
//! architecture, parameter count) and the library's two rules: a file whose name matches an
//! existing model but whose sha256 differs is that model's next version, and the model in use
//! is the one chosen last (`used_at`), so that the one chosen before it is what a failed switch
//! goes back to. Reading the GGUF, hashing and copying are the glue's (chat/); this crate
//! knows nothing of models.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::types::{ConversationId, now_ms};

/// A model's row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModelId(pub i64);

/// What the glue read from a model file before keeping it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewModel {
    /// `general.basename`, else `general.name`, else the file's stem.
    pub name: String,
    /// Where the library keeps the file (absolute).
    pub path: String,
    pub architecture: String,
    pub parameters: u64,
    pub quantization: String,
    pub file_bytes: u64,
    /// Lowercase hex.
    pub sha256: String,
    /// Where it was imported from (a path the user gave).
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRecord {
    pub id: ModelId,
    pub name: String,
    /// 1 for the first file of this name, then one more for each with another sha256.
    pub version: i64,
    pub path: String,
    pub architecture: String,
    pub parameters: u64,
    pub quantization: String,
    pub file_bytes: u64,
    pub sha256: String,
    pub source: String,
    pub added_at: i64,
    /// When it was last chosen; `None`: never.
    pub used_at: Option<i64>,
}

impl ModelRecord {
    /// `name v2`: how the CLI and the app name one version.
    pub fn label(&self) -> String {
        format!("{} v{}", self.name, self.version)
    }
}

const COLUMNS: &str = "id, name, version, path, architecture, parameters, quantization, \
                       file_bytes, sha256, source, added_at, used_at";

fn model(r: &rusqlite::Row<'_>) -> rusqlite::Result<ModelRecord> {
    Ok(ModelRecord {
        id: ModelId(r.get(0)?),
        name: r.get(1)?,
        version: r.get(2)?,
        path: r.get(3)?,
        architecture: r.get(4)?,
        parameters: r.get::<_, i64>(5)?.max(0) as u64,
        quantization: r.get(6)?,
        file_bytes: r.get::<_, i64>(7)?.max(0) as u64,
        sha256: r.get(8)?,
        source: r.get(9)?,
        added_at: r.get(10)?,
        used_at: r.get(11)?,
    })
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Store {
    /// Keep a model, as the next version of its name when one of that name is kept already.
    /// `Ok((record, false))` when a file with this sha256 is in the library already (nothing is
    /// added: the same bytes are the same model, whatever they are called).
    pub fn add_model(&self, new: &NewModel) -> Result<(ModelRecord, bool)> {
        if !is_sha256_hex(&new.sha256) {
            return Err(Error::InvalidArgument(format!(
                "`{}` is not a sha256 in lowercase hex",
                new.sha256
            )));
        }
        let name = new.name.trim();
        if name.is_empty() {
            return Err(Error::InvalidArgument("a model needs a name".into()));
        }
        self.in_transaction(|tx| {
            if let Some(existing) = tx
                .query_row(
                    &format!("SELECT {COLUMNS} FROM models WHERE sha256 = ?1"),
                    [&new.sha256],
                    model,
                )
                .optional()?
            {
                return Ok((existing, false));
            }
            let version: i64 = tx.query_row(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM models WHERE name = ?1",
                [name],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO models (name, version, path, architecture, parameters, quantization,
                                     file_bytes, sha256, source, added_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    name,
                    version,
                    new.path,
                    new.architecture,
                    new.parameters as i64,
                    new.quantization,
                    new.file_bytes as i64,
                    new.sha256,
                    new.source,
                    now_ms()
                ],
            )?;
            let id = tx.last_insert_rowid();
            Ok((
                tx.query_row(
                    &format!("SELECT {COLUMNS} FROM models WHERE id = ?1"),
                    [id],
                    model,
                )?,
                true,
            ))
        })
    }

    /// Every model, by name and then version.
    pub fn models(&self) -> Result<Vec<ModelRecord>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM models ORDER BY name COLLATE NOCASE, version"
        ))?;
        let rows = stmt.query_map([], model)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn model(&self, id: ModelId) -> Result<ModelRecord> {
        self.conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM models WHERE id = ?1"),
                [id.0],
                model,
            )
            .optional()?
            .ok_or_else(|| Error::ModelNotFound(id.0.to_string()))
    }

    /// The model `text` names: `name` (its newest version), `name v2` or `name@2`, the file's
    /// name, or the start of its sha256 (at least 8 hex digits, as git resolves short hashes).
    pub fn resolve_model(&self, text: &str) -> Result<ModelRecord> {
        let text = text.trim();
        let all = self.models()?;
        let (name, version) = split_version(text);
        let by_name: Vec<&ModelRecord> = all
            .iter()
            .filter(|m| m.name.eq_ignore_ascii_case(name))
            .collect();
        if let Some(v) = version {
            if let Some(m) = by_name.iter().find(|m| m.version == v) {
                return Ok((*m).clone());
            }
        } else if let Some(newest) = by_name.iter().max_by_key(|m| m.version) {
            return Ok((*newest).clone());
        }
        let by_file: Vec<&ModelRecord> = all
            .iter()
            .filter(|m| {
                std::path::Path::new(&m.path)
                    .file_name()
                    .is_some_and(|f| f.to_string_lossy() == text)
            })
            .collect();
        if let [one] = by_file.as_slice() {
            return Ok((*one).clone());
        }
        let lower = text.to_ascii_lowercase();
        if lower.len() >= 8 && lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            let by_sha: Vec<&ModelRecord> = all
                .iter()
                .filter(|m| m.sha256.starts_with(&lower))
                .collect();
            match by_sha.as_slice() {
                [one] => return Ok((*one).clone()),
                [] => {}
                _ => return Err(Error::AmbiguousModel(text.to_string())),
            }
        }
        if by_file.len() > 1 {
            return Err(Error::AmbiguousModel(text.to_string()));
        }
        Err(Error::ModelNotFound(text.to_string()))
    }

    /// Record that `id` is the model in use from now on.
    pub fn set_model_in_use(&self, id: ModelId) -> Result<ModelRecord> {
        self.in_transaction(|tx| {
            // strictly after every earlier choice, even within one millisecond
            let latest: Option<i64> =
                tx.query_row("SELECT MAX(used_at) FROM models", [], |r| r.get(0))?;
            let at = now_ms().max(latest.map_or(i64::MIN, |l| l + 1));
            let changed = tx.execute("UPDATE models SET used_at = ?1 WHERE id = ?2", [at, id.0])?;
            if changed == 0 {
                return Err(Error::ModelNotFound(id.0.to_string()));
            }
            Ok(())
        })?;
        self.model(id)
    }

    /// The model in use: the one chosen last, if any was.
    pub fn model_in_use(&self) -> Result<Option<ModelRecord>> {
        Ok(self.models_by_use()?.into_iter().next())
    }

    /// The model chosen before the one in use, if any: what a failed switch goes back to.
    pub fn previous_model(&self) -> Result<Option<ModelRecord>> {
        Ok(self.models_by_use()?.into_iter().nth(1))
    }

    fn models_by_use(&self) -> Result<Vec<ModelRecord>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM models WHERE used_at IS NOT NULL ORDER BY used_at DESC LIMIT 2"
        ))?;
        let rows = stmt.query_map([], model)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Forget a model (the caller deletes its file). The model in use is refused: choose
    /// another first.
    pub fn remove_model(&self, id: ModelId) -> Result<ModelRecord> {
        let record = self.model(id)?;
        if self.model_in_use()?.is_some_and(|m| m.id == id) {
            return Err(Error::ModelInUse(record.label()));
        }
        self.conn
            .execute("DELETE FROM models WHERE id = ?1", [id.0])?;
        Ok(record)
    }

    /// Record the model (its sha256) the conversation's turns are being made with.
    pub fn set_conversation_model_sha256(&self, id: &ConversationId, sha256: &str) -> Result<()> {
        let changed = self.conn.execute(
            "UPDATE conversations SET model_sha256 = ?1 WHERE id = ?2",
            params![sha256, id.as_str()],
        )?;
        if changed == 0 {
            return Err(Error::ConversationNotFound(id.to_string()));
        }
        Ok(())
    }

    /// The sha256 of the model the conversation was last held with (`None`: before the
    /// library existed, or no turn yet).
    pub fn conversation_model_sha256(&self, id: &ConversationId) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT model_sha256 FROM conversations WHERE id = ?1",
                [id.as_str()],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(|| Error::ConversationNotFound(id.to_string()))
    }
}

/// `gemma v2` and `gemma@2` name version 2 of `gemma`; anything else is a name alone.
fn split_version(text: &str) -> (&str, Option<i64>) {
    let split = text
        .rsplit_once('@')
        .map(|(n, v)| (n, v.strip_prefix('v').unwrap_or(v)))
        .or_else(|| {
            text.rsplit_once(' ')
                .and_then(|(n, v)| v.strip_prefix('v').map(|v| (n, v)))
        });
    match split {
        Some((name, v)) if !name.trim().is_empty() => match v.parse::<i64>() {
            Ok(v) if v > 0 => (name.trim(), Some(v)),
            _ => (text, None),
        },
        _ => (text, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(name: &str, sha_digit: char) -> NewModel {
        NewModel {
            name: name.into(),
            path: format!("/models/{name}-{sha_digit}.gguf"),
            architecture: "gemma3".into(),
            parameters: 268_000_000,
            quantization: "Q4_K_M".into(),
            file_bytes: 253_000_000,
            sha256: sha_digit.to_string().repeat(64),
            source: "/downloads/x.gguf".into(),
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("c.db")).unwrap().store;
        (dir, store)
    }

    #[test]
    fn versions_follow_the_name_and_the_same_bytes_are_kept_once() {
        let (_dir, s) = store();
        let (a1, added) = s.add_model(&new("Gemma 3 270m", 'a')).unwrap();
        assert!(added);
        assert_eq!(a1.version, 1);
        let (a2, _) = s.add_model(&new("gemma 3 270M", 'b')).unwrap();
        assert_eq!(a2.version, 1, "names are compared as written: another name");
        let (a3, _) = s.add_model(&new("Gemma 3 270m", 'c')).unwrap();
        assert_eq!(a3.version, 2);
        let (again, added) = s.add_model(&new("renamed", 'a')).unwrap();
        assert!(!added);
        assert_eq!(again.id, a1.id);
        assert_eq!(s.models().unwrap().len(), 3);
    }

    #[test]
    fn names_versions_files_and_short_hashes_resolve() {
        let (_dir, s) = store();
        let (v1, _) = s.add_model(&new("gemma", 'a')).unwrap();
        let (v2, _) = s.add_model(&new("gemma", 'b')).unwrap();
        assert_eq!(
            s.resolve_model("gemma").unwrap().id,
            v2.id,
            "newest version"
        );
        assert_eq!(s.resolve_model("gemma v1").unwrap().id, v1.id);
        assert_eq!(s.resolve_model("GEMMA@1").unwrap().id, v1.id);
        assert_eq!(s.resolve_model("gemma-b.gguf").unwrap().id, v2.id);
        assert_eq!(s.resolve_model("aaaaaaaa").unwrap().id, v1.id);
        assert!(matches!(
            s.resolve_model("gemma v3"),
            Err(Error::ModelNotFound(_))
        ));
        assert!(matches!(
            s.resolve_model("aaaa"),
            Err(Error::ModelNotFound(_))
        ));
        assert!(matches!(
            s.resolve_model("llama"),
            Err(Error::ModelNotFound(_))
        ));
    }

    #[test]
    fn the_model_in_use_is_the_last_chosen_and_cannot_be_removed() {
        let (_dir, s) = store();
        assert_eq!(s.model_in_use().unwrap(), None);
        let (v1, _) = s.add_model(&new("gemma", 'a')).unwrap();
        let (v2, _) = s.add_model(&new("gemma", 'b')).unwrap();
        s.set_model_in_use(v1.id).unwrap();
        s.set_model_in_use(v2.id).unwrap();
        assert_eq!(s.model_in_use().unwrap().unwrap().id, v2.id);
        assert_eq!(s.previous_model().unwrap().unwrap().id, v1.id);
        assert!(matches!(s.remove_model(v2.id), Err(Error::ModelInUse(_))));
        s.set_model_in_use(v1.id).unwrap();
        assert_eq!(s.previous_model().unwrap().unwrap().id, v2.id);
        s.remove_model(v2.id).unwrap();
        assert_eq!(s.models().unwrap().len(), 1);
        assert_eq!(s.previous_model().unwrap(), None);
    }

    #[test]
    fn a_bad_fingerprint_is_refused() {
        let (_dir, s) = store();
        let mut m = new("gemma", 'a');
        m.sha256 = "A".repeat(64);
        assert!(matches!(s.add_model(&m), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn conversations_record_their_model() {
        let (_dir, s) = store();
        let c = s
            .create_conversation("t", None, &serde_json::json!({}))
            .unwrap();
        assert_eq!(s.conversation_model_sha256(&c.id).unwrap(), None);
        s.set_conversation_model_sha256(&c.id, &"a".repeat(64))
            .unwrap();
        assert_eq!(
            s.conversation_model_sha256(&c.id).unwrap(),
            Some("a".repeat(64))
        );
    }

    #[test]
    fn versions_are_split_from_names() {
        assert_eq!(split_version("gemma v2"), ("gemma", Some(2)));
        assert_eq!(split_version("gemma@3"), ("gemma", Some(3)));
        assert_eq!(split_version("gemma@v3"), ("gemma", Some(3)));
        assert_eq!(split_version("Gemma 3 270m"), ("Gemma 3 270m", None));
        assert_eq!(split_version("gemma v0"), ("gemma v0", None));
        assert_eq!(split_version("@2"), ("@2", None));
    }
}
