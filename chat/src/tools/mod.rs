//! The agent's tools wired to Companion: [`StoreHost`] is the agent's `ToolHost` over the
//! memory store (conversation search, notes, reminders, the audit log), [`JobSummarizer`]
//! its `FileSummarizer` over the resumable document job, and [`sandbox_for`] builds the
//! sandbox from the grants kept in the store (plus any given for this run), with Companion's
//! own files marked private.

mod host;
mod summarize;

use std::path::{Path, PathBuf};

pub use host::{PlatformReminders, StoreHost};
pub use summarize::JobSummarizer;

use agent::{GrantMode, GrantSpec, Sandbox};
use memory::Store;

/// Companion's own files for a database at `db`: everything the store keeps beside it
/// ([`memory::store_files`]), the log folder beside it (the log names files and
/// conversations), and the platform's data folder (not the folder `COMPANION_DB` put the
/// database in: that may be any folder of the user's). Tools never list or read them.
pub fn private_paths(db: &Path) -> Vec<PathBuf> {
    let mut paths = memory::store_files(db);
    paths.push(logging::log_dir(db));
    paths.push(memory::default_data_dir());
    paths
}

/// Where a folder granted through a security-scoped bookmark (iOS's document picker) is now.
/// The platform resolves the bookmark at every use, because the user can move the folder or
/// revoke Companion's access in the Files app at any time.
pub trait BookmarkResolver: Send + Sync {
    /// The folder's path now (access to it started) and, when the platform made a fresh
    /// bookmark for a stale one, that bookmark; or why the folder can no longer be opened.
    fn resolve(&self, bookmark: &[u8]) -> Result<(PathBuf, Option<Vec<u8>>), String>;
}

/// A kept grant the tools cannot use now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableGrant {
    pub path: String,
    pub reason: String,
}

/// Where a kept grant is now: its own path, or (with a bookmark and a resolver) where the
/// bookmark leads, refreshed in the store when the platform made a new bookmark.
pub fn locate_grant(
    store: &Store,
    grant: &memory::FolderGrant,
    resolver: Option<&dyn BookmarkResolver>,
) -> Result<PathBuf, String> {
    let path = match (&grant.bookmark, resolver) {
        (Some(bookmark), Some(resolver)) => {
            let (path, refreshed) = resolver.resolve(bookmark)?;
            if let Some(fresh) = refreshed
                && let Err(e) = store.refresh_grant_bookmark(&grant.path, &fresh)
            {
                tracing::warn!(code = e.code(), error = %e, "a refreshed bookmark was not kept");
            }
            path
        }
        _ => PathBuf::from(&grant.path),
    };
    if path.is_dir() {
        Ok(path)
    } else {
        Err("the folder is not there (moved, deleted or on a disk that is not connected)".into())
    }
}

/// The grants the user keeps in the store, then `extra` (a command line's `--allow`), with
/// the store's own files private. A kept grant whose folder is gone (a disk unplugged, the
/// folder moved) is left out rather than failing every tool: the app shows it as missing.
pub fn sandbox_for(store: &Store, extra: &[GrantSpec]) -> agent::Result<Sandbox> {
    sandbox_with(store, extra, None).map(|(sandbox, _)| sandbox)
}

/// [`sandbox_for`], resolving bookmarked grants through `resolver`: a grant whose bookmark
/// is revoked is left out (nothing under it can be reached) and returned with the reason, for
/// the app to tell the user.
pub fn sandbox_with(
    store: &Store,
    extra: &[GrantSpec],
    resolver: Option<&dyn BookmarkResolver>,
) -> agent::Result<(Sandbox, Vec<UnavailableGrant>)> {
    let mut specs = Vec::new();
    let mut unavailable = Vec::new();
    for grant in store.folder_grants().map_err(host::host_error)? {
        match locate_grant(store, &grant, resolver) {
            Ok(path) => specs.push(GrantSpec {
                path,
                mode: match grant.mode {
                    memory::GrantMode::Read => GrantMode::ReadOnly,
                    memory::GrantMode::Write => GrantMode::MayWrite,
                },
            }),
            Err(reason) => unavailable.push(UnavailableGrant {
                path: grant.path,
                reason,
            }),
        }
    }
    specs.extend(extra.iter().cloned());
    Ok((
        Sandbox::new(&specs, &private_paths(store.path()))?,
        unavailable,
    ))
}
