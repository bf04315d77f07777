//! Bounded walks over granted folders, for find_files and search_files: depth-first, names in
//! order, each folder opened by handle beneath its parent with no symlink followed (so a walk
//! cannot leave the grant, loop, or be redirected by a swapped link, and a tree deeper than
//! `PATH_MAX` is walked without ever building a path the system must resolve). Hidden names,
//! Companion's private data and symlinks are skipped; names that are not UTF-8 cannot be
//! passed back to a tool as JSON text, so they are skipped and counted. The walk stops at the
//! entry cap, and reports what it skipped and why.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use super::{Location, Sandbox, display, is_hidden};
use crate::limits::Limits;

/// One file or folder met by a walk.
pub(crate) struct Entry<'a> {
    /// The folder it is in, open.
    pub parent: &'a Dir,
    pub name: &'a str,
    pub grant: usize,
    /// Relative to the grant.
    pub rel: &'a Path,
    pub is_dir: bool,
    pub len: u64,
}

impl Entry<'_> {
    pub fn shown(&self, sandbox: &Sandbox) -> String {
        display(sandbox.grant_name(self.grant), self.rel)
    }
}

/// What a walk looked at and what it left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WalkStats {
    pub visited: usize,
    /// Stopped at [`Limits::search_max_entries`].
    pub hit_entry_cap: bool,
    /// Folders deeper than [`Limits::walk_max_depth`] or with paths longer than
    /// [`super::MAX_PATH_BYTES`], not entered.
    pub too_deep: usize,
    pub non_utf8_names: usize,
    /// Folders that could not be read (permissions).
    pub unreadable: usize,
    /// The visitor stopped the walk.
    pub stopped: bool,
}

impl WalkStats {
    /// Sentences on what was left out, for the model and the user.
    pub fn notices(&self, limits: &Limits) -> Vec<String> {
        let mut out = Vec::new();
        if self.hit_entry_cap {
            out.push(format!(
                "stopped after looking at {} files and folders (the most one search looks at); name a folder to search in",
                limits.search_max_entries
            ));
        }
        if self.too_deep > 0 {
            out.push(format!(
                "{} folders nested deeper than {} levels (or with paths over {} bytes) were not searched",
                self.too_deep,
                limits.walk_max_depth,
                super::MAX_PATH_BYTES
            ));
        }
        if self.non_utf8_names > 0 {
            out.push(format!(
                "{} names that are not valid UTF-8 were skipped",
                self.non_utf8_names
            ));
        }
        if self.unreadable > 0 {
            out.push(format!("{} folders could not be read", self.unreadable));
        }
        out
    }
}

/// Walk beneath `start` (a folder), or every grant when `None`, calling `visit` for each file
/// and folder until it breaks or the cap is reached.
pub(crate) fn walk(
    sandbox: &Sandbox,
    start: Option<&Location>,
    limits: &Limits,
    visit: &mut dyn FnMut(&Entry<'_>) -> ControlFlow<()>,
) -> crate::Result<WalkStats> {
    let mut stats = WalkStats::default();
    let starts: Vec<Location> = match start {
        Some(location) => vec![location.clone()],
        None => (0..sandbox.grant_count())
            .map(|g| sandbox.root(g))
            .collect(),
    };
    for location in starts {
        let dir = sandbox.open_dir(&location)?;
        let mut walker = Walker {
            sandbox,
            limits,
            grant: location.grant,
            stats: &mut stats,
            visit,
        };
        let mut rel = location.rel.clone();
        if walker.folder(&dir, &mut rel, 0).is_break() {
            break;
        }
    }
    Ok(stats)
}

struct Walker<'s, 'v> {
    sandbox: &'s Sandbox,
    limits: &'s Limits,
    grant: usize,
    stats: &'s mut WalkStats,
    visit: &'v mut dyn FnMut(&Entry<'_>) -> ControlFlow<()>,
}

impl Walker<'_, '_> {
    fn folder(&mut self, dir: &Dir, rel: &mut PathBuf, depth: usize) -> ControlFlow<()> {
        let Ok(entries) = dir.entries() else {
            self.stats.unreadable += 1;
            return ControlFlow::Continue(());
        };
        // names in order, so results do not depend on the file system's; no more names than
        // the walk may still look at are kept
        let room = self
            .limits
            .search_max_entries
            .saturating_sub(self.stats.visited);
        let mut names: Vec<(String, bool, u64)> = Vec::new();
        let mut more = false;
        for entry in entries.flatten() {
            let name = entry.file_name();
            if is_hidden(&name) {
                continue;
            }
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_symlink() || !(file_type.is_dir() || file_type.is_file()) {
                continue;
            }
            let Some(name) = name.to_str() else {
                self.stats.non_utf8_names += 1;
                continue;
            };
            if names.len() == room {
                more = true;
                break;
            }
            let len = if file_type.is_file() {
                entry.metadata().map(|m| m.len()).unwrap_or(0)
            } else {
                0
            };
            names.push((name.to_string(), file_type.is_dir(), len));
        }
        names.sort();
        for (name, is_dir, len) in names {
            rel.push(&name);
            let flow = self.entry(dir, &name, rel, is_dir, len, depth);
            rel.pop();
            flow?;
        }
        if more {
            self.stats.hit_entry_cap = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn entry(
        &mut self,
        dir: &Dir,
        name: &str,
        rel: &mut PathBuf,
        is_dir: bool,
        len: u64,
        depth: usize,
    ) -> ControlFlow<()> {
        if self.sandbox.is_private(self.grant, rel) {
            return ControlFlow::Continue(());
        }
        if self.stats.visited >= self.limits.search_max_entries {
            self.stats.hit_entry_cap = true;
            return ControlFlow::Break(());
        }
        self.stats.visited += 1;
        let entry = Entry {
            parent: dir,
            name,
            grant: self.grant,
            rel,
            is_dir,
            len,
        };
        if (self.visit)(&entry).is_break() {
            self.stats.stopped = true;
            return ControlFlow::Break(());
        }
        if !is_dir {
            return ControlFlow::Continue(());
        }
        if depth + 1 >= self.limits.walk_max_depth || rel.as_os_str().len() > super::MAX_PATH_BYTES
        {
            self.stats.too_deep += 1;
            return ControlFlow::Continue(());
        }
        match dir.open_dir_nofollow(name) {
            Ok(sub) => self.folder(&sub, rel, depth + 1),
            Err(_) => {
                self.stats.unreadable += 1;
                ControlFlow::Continue(())
            }
        }
    }
}
