//! The folders the user granted the agent, with their mode (read only, or "may write"), as the
//! app keeps, shows and revokes them. The store only remembers them: what a grant allows is
//! enforced by the agent's sandbox, which opens them.
//!
//! On iOS a folder picked through the document picker is reachable only through the
//! security-scoped bookmark iOS made for it: the grant keeps those bytes, and the app resolves
//! them at every use (a bookmark the user revoked, or whose folder is gone, is refused).

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::types::now_ms;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantMode {
    /// Tools may list and read.
    Read,
    /// Tools may also write, each write asked first.
    Write,
}

impl GrantMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantMode::Read => "read",
            GrantMode::Write => "write",
        }
    }

    fn parse(s: &str) -> GrantMode {
        // the CHECK constraint admits only these two
        if s == "write" {
            GrantMode::Write
        } else {
            GrantMode::Read
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderGrant {
    /// Absolute, as the user picked it.
    pub path: String,
    pub mode: GrantMode,
    pub added_at: i64,
    /// iOS's security-scoped bookmark of the folder (opaque bytes), when it was picked there.
    #[serde(skip)]
    pub bookmark: Option<Vec<u8>>,
}

const COLUMNS: &str = "path, mode, added_at, bookmark";

impl Store {
    /// Grant a folder, or change the mode of one already granted.
    pub fn grant_folder(&self, path: &str, mode: GrantMode) -> Result<FolderGrant> {
        self.grant_folder_with(path, mode, None)
    }

    /// [`Self::grant_folder`], keeping the folder's security-scoped `bookmark` when given (a
    /// new one replaces the old; none keeps what is there).
    pub fn grant_folder_with(
        &self,
        path: &str,
        mode: GrantMode,
        bookmark: Option<&[u8]>,
    ) -> Result<FolderGrant> {
        if !std::path::Path::new(path).is_absolute() {
            return Err(Error::InvalidArgument(format!(
                "a granted folder is kept by its absolute path, not `{path}`"
            )));
        }
        let now = now_ms();
        self.conn.execute(
            "INSERT INTO folder_grants (path, mode, added_at, bookmark) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (path) DO UPDATE SET mode = excluded.mode,
                 bookmark = coalesce(excluded.bookmark, bookmark)",
            params![path, mode.as_str(), now, bookmark],
        )?;
        Ok(self.conn.query_row(
            &format!("SELECT {COLUMNS} FROM folder_grants WHERE path = ?1"),
            [path],
            grant,
        )?)
    }

    /// iOS said a grant's bookmark is stale and made a new one: keep that.
    pub fn refresh_grant_bookmark(&self, path: &str, bookmark: &[u8]) -> Result<bool> {
        Ok(self.conn.execute(
            "UPDATE folder_grants SET bookmark = ?2 WHERE path = ?1",
            params![path, bookmark],
        )? > 0)
    }

    /// Every granted folder, in the order granted.
    pub fn folder_grants(&self) -> Result<Vec<FolderGrant>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM folder_grants ORDER BY added_at, path"
        ))?;
        let rows = stmt.query_map([], grant)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Revoke a grant; `false` when the folder was not granted.
    pub fn revoke_folder(&self, path: &str) -> Result<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM folder_grants WHERE path = ?1", [path])?
            > 0)
    }
}

fn grant(r: &rusqlite::Row<'_>) -> rusqlite::Result<FolderGrant> {
    Ok(FolderGrant {
        path: r.get(0)?,
        mode: GrantMode::parse(&r.get::<_, String>(1)?),
        added_at: r.get(2)?,
        bookmark: r.get(3)?,
    })
}
