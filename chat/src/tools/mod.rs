//! The agent's tools wired to Companion: [`StoreHost`] is the agent's `ToolHost` over the
//! memory store (conversation search, notes, reminders, the audit log), [`JobSummarizer`]
//! its `FileSummarizer` over the resumable document job, and [`sandbox_for`] builds the
//! sandbox from the grants kept in the store (plus any given for this run), with Companion's
//! own files marked private.

mod host;
mod summarize;

use std::path::{Path, PathBuf};

pub use host::StoreHost;
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

/// The grants the user keeps in the store, then `extra` (a command line's `--allow`), with
/// the store's own files private. A kept grant whose folder is gone (a disk unplugged, the
/// folder moved) is left out rather than failing every tool: the app shows it as missing.
pub fn sandbox_for(store: &Store, extra: &[GrantSpec]) -> agent::Result<Sandbox> {
    let mut specs: Vec<GrantSpec> = store
        .folder_grants()
        .map_err(host::host_error)?
        .into_iter()
        .filter(|g| Path::new(&g.path).is_dir())
        .map(|g| GrantSpec {
            path: PathBuf::from(g.path),
            mode: match g.mode {
                memory::GrantMode::Read => GrantMode::ReadOnly,
                memory::GrantMode::Write => GrantMode::MayWrite,
            },
        })
        .collect();
    specs.extend(extra.iter().cloned());
    Sandbox::new(&specs, &private_paths(store.path()))
}
