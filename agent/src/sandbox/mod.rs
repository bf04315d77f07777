//! The sandbox: the folders the user granted, and the only way tools reach files.
//!
//! Each granted folder is opened once as a `cap_std::fs::Dir`, and every path a tool gets is
//! resolved beneath that handle — capability-style access as in cap-std and WASI, not string
//! checks. Resolving takes two steps:
//!
//! 1. `Dir::canonicalize` resolves the path beneath the folder, following symlinks that stay
//!    inside it; `..` that climbs out, absolute symlinks and symlinks leading elsewhere end in
//!    cap-std's "a path led outside" error, and a loop in `ELOOP`. The canonical path is then
//!    checked against the sandbox's rules: no hidden name (a dot-file or dot-folder) anywhere
//!    in it, nothing in Companion's own data (the paths the caller marks private).
//! 2. That canonical path is opened one component at a time with no symlink followed at all
//!    (`open_dir_nofollow`, then a no-follow open of the file), each step beneath the handle
//!    of the one before. So what is opened is exactly what was checked: a symlink swapped in
//!    after the check makes the open fail (`changed while it was being opened`) instead of
//!    leading anywhere — and even then cap-std would keep it inside the folder.
//!
//! Walks (find_files, search_files) go by handles too and never follow symlinks: a link's
//! target inside the folder is found where it is, and no loop can trap them.
//! Hard links are files like any other: a hard link inside a granted folder is inside it.

mod path;
pub(crate) mod walk;

use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, OpenOptions};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use path::{MAX_NAME_BYTES, MAX_PATH_BYTES};
pub(crate) use path::{display, is_hidden, shown};

/// What tools may do in a granted folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GrantMode {
    /// List and read.
    ReadOnly,
    /// Also write, every write asked first.
    MayWrite,
}

/// A folder to grant, as the user picked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantSpec {
    pub path: PathBuf,
    pub mode: GrantMode,
}

impl GrantSpec {
    pub fn read_only(path: impl Into<PathBuf>) -> Self {
        GrantSpec {
            path: path.into(),
            mode: GrantMode::ReadOnly,
        }
    }

    pub fn may_write(path: impl Into<PathBuf>) -> Self {
        GrantSpec {
            path: path.into(),
            mode: GrantMode::MayWrite,
        }
    }
}

/// A granted folder as tools show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantInfo {
    /// How paths inside it start: the folder's own name, made unique (`docs`, `docs-2`).
    pub name: String,
    /// Its canonical location.
    pub path: PathBuf,
    pub mode: GrantMode,
}

struct Grant {
    info: GrantInfo,
    /// As granted, made absolute (a granted symlink is also known by this path).
    given: PathBuf,
    dir: Dir,
    /// Canonical paths, relative to the folder, of Companion's data inside it.
    private: Vec<PathBuf>,
}

/// A place inside a grant, canonical and checked: no symlink, no hidden name, nothing private.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub(crate) grant: usize,
    /// Relative to the grant, no `.`, `..` or symlink in it; empty for the folder itself.
    pub(crate) rel: PathBuf,
    shown: String,
}

impl Location {
    /// `NAME/rel`: how results name it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    pub fn relative(&self) -> &Path {
        &self.rel
    }
}

/// The granted folders and what tools may reach through them.
pub struct Sandbox {
    grants: Vec<Grant>,
    home: Option<PathBuf>,
    #[cfg(test)]
    before_open: std::sync::Mutex<Option<Box<dyn FnMut() + Send>>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("grants", &self.grants())
            .finish()
    }
}

impl Sandbox {
    /// Open the granted folders. `private` are Companion's own data (its data directory, the
    /// database and its side files): never listed or read, and a folder inside them cannot
    /// be granted.
    pub fn new(specs: &[GrantSpec], private: &[PathBuf]) -> Result<Sandbox> {
        let private: Vec<PathBuf> = private.iter().map(|p| canonical_or_lexical(p)).collect();
        let mut grants: Vec<Grant> = Vec::new();
        for spec in specs {
            let bad = |problem: String| Error::BadGrant {
                path: spec.path.clone(),
                problem,
            };
            let given = std::path::absolute(&spec.path).map_err(|e| bad(e.to_string()))?;
            let root = std::fs::canonicalize(&given).map_err(|e| {
                bad(match e.kind() {
                    std::io::ErrorKind::NotFound => "no such folder".to_string(),
                    _ => e.to_string(),
                })
            })?;
            if !root.is_dir() {
                return Err(bad("it is not a folder".into()));
            }
            if private.iter().any(|p| root.starts_with(p)) {
                return Err(bad("it holds Companion's own data".into()));
            }
            if let Some(existing) = grants.iter_mut().find(|g| g.info.path == root) {
                // the same folder twice: the wider mode stands
                if spec.mode == GrantMode::MayWrite {
                    existing.info.mode = GrantMode::MayWrite;
                }
                continue;
            }
            let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())
                .map_err(|e| bad(e.to_string()))?;
            let base = root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "root".into());
            let mut name = base.clone();
            let mut n = 2;
            while grants.iter().any(|g| g.info.name == name) {
                name = format!("{base}-{n}");
                n += 1;
            }
            let private = private
                .iter()
                .filter_map(|p| p.strip_prefix(&root).ok())
                .map(Path::to_path_buf)
                .collect();
            grants.push(Grant {
                info: GrantInfo {
                    name,
                    path: root,
                    mode: spec.mode,
                },
                given,
                dir,
                private,
            });
        }
        tracing::debug!(grants = grants.len(), "sandbox opened");
        Ok(Sandbox {
            grants,
            home: std::env::var_os("HOME").map(PathBuf::from),
            #[cfg(test)]
            before_open: std::sync::Mutex::new(None),
        })
    }

    pub fn grants(&self) -> Vec<GrantInfo> {
        self.grants.iter().map(|g| g.info.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    pub(crate) fn grant_count(&self) -> usize {
        self.grants.len()
    }

    pub(crate) fn grant_name(&self, grant: usize) -> &str {
        &self.grants[grant].info.name
    }

    pub(crate) fn grant_dir(&self, grant: usize) -> &Dir {
        &self.grants[grant].dir
    }

    pub(crate) fn is_private(&self, grant: usize, rel: &Path) -> bool {
        self.grants[grant]
            .private
            .iter()
            .any(|p| rel.starts_with(p))
    }

    /// The folder itself, as a location.
    pub(crate) fn root(&self, grant: usize) -> Location {
        Location {
            grant,
            rel: PathBuf::new(),
            shown: self.grants[grant].info.name.clone(),
        }
    }

    /// Where `input` leads, checked (see the module docs). The file or folder exists.
    pub fn locate(&self, input: &str) -> Result<Location> {
        let paths: Vec<path::GrantPaths<'_>> = self
            .grants
            .iter()
            .map(|g| path::GrantPaths {
                name: &g.info.name,
                given: &g.given,
                root: &g.info.path,
            })
            .collect();
        let (grant, rel) = path::split(input, &paths, self.home.as_deref())?;
        let asked = shown(input.trim());
        if path::hidden_component(&rel) {
            return Err(Error::Hidden { path: asked });
        }
        let g = &self.grants[grant];
        let canonical = if rel.components().all(|c| c == Component::CurDir) {
            PathBuf::new()
        } else {
            path::clean(
                &g.dir
                    .canonicalize(&rel)
                    .map_err(|e| io_error(e, &asked, "resolve"))?,
            )
        };
        if path::hidden_component(&canonical) {
            return Err(Error::Hidden { path: asked });
        }
        if self.is_private(grant, &canonical) {
            return Err(Error::Private { path: asked });
        }
        Ok(Location {
            grant,
            shown: display(&g.info.name, &canonical),
            rel: canonical,
        })
    }

    /// Where a write to `input` would go: a new or existing file whose folder exists, in a
    /// grant that may be written — the check a write tool makes before it asks.
    pub fn locate_for_write(&self, input: &str) -> Result<Location> {
        let trimmed = input.trim();
        let (parent, name) = match trimmed.rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None if self.grants.len() == 1 => ("", trimmed),
            None => {
                return Err(Error::OutsideGrants {
                    path: shown(trimmed),
                    hint: Some("name the granted folder first".into()),
                });
            }
        };
        let name = std::ffi::OsStr::new(name);
        if name.is_empty() || name == "." || name == ".." {
            return Err(Error::NotAFile {
                path: shown(trimmed),
            });
        }
        if is_hidden(name) {
            return Err(Error::Hidden {
                path: shown(trimmed),
            });
        }
        let folder = if parent.is_empty() {
            self.root(0)
        } else {
            self.locate(parent)?
        };
        if self.grants[folder.grant].info.mode != GrantMode::MayWrite {
            return Err(Error::ReadOnly {
                path: shown(trimmed),
            });
        }
        let rel = folder.rel.join(name);
        if self.is_private(folder.grant, &rel) {
            return Err(Error::Private {
                path: shown(trimmed),
            });
        }
        Ok(Location {
            grant: folder.grant,
            shown: display(self.grant_name(folder.grant), &rel),
            rel,
        })
    }

    /// Open the file at `location` for reading, with its metadata. A folder, a device, a
    /// socket or a pipe is refused before it is opened (opening a pipe would wait for a
    /// writer).
    pub(crate) fn open_file(&self, location: &Location) -> Result<(File, Metadata)> {
        let shown = location.shown();
        let dir = self.grant_dir(location.grant);
        let (Some(parent), Some(name)) = (location.rel.parent(), location.rel.file_name()) else {
            return Err(Error::NotAFile { path: shown.into() });
        };
        let folder = open_dir_nofollow(dir, parent).map_err(|e| changed(e, shown))?;
        let meta = folder
            .symlink_metadata(name)
            .map_err(|e| changed(e, shown))?;
        if meta.is_dir() {
            return Err(Error::NotAFile { path: shown.into() });
        }
        if !meta.is_file() {
            return Err(Error::NotText { path: shown.into() });
        }
        #[cfg(test)]
        self.run_before_open();
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        let file = folder
            .open_with(name, &options)
            .map_err(|e| changed(e, shown))?;
        let meta = file.metadata().map_err(|e| io_error(e, shown, "read"))?;
        if !meta.is_file() {
            return Err(Error::Changed { path: shown.into() });
        }
        Ok((file, meta))
    }

    /// Open the folder at `location`.
    pub(crate) fn open_dir(&self, location: &Location) -> Result<Dir> {
        let shown = location.shown();
        let dir = self.grant_dir(location.grant);
        if location.rel.as_os_str().is_empty() {
            return dir.try_clone().map_err(|e| io_error(e, shown, "open"));
        }
        let meta = dir
            .symlink_metadata(&location.rel)
            .map_err(|e| changed(e, shown))?;
        if !meta.is_dir() {
            return Err(Error::NotAFolder { path: shown.into() });
        }
        #[cfg(test)]
        self.run_before_open();
        open_dir_nofollow(dir, &location.rel).map_err(|e| changed(e, shown))
    }

    /// The absolute location (for the summarizer, which reads by path).
    pub(crate) fn absolute(&self, location: &Location) -> PathBuf {
        self.grants[location.grant].info.path.join(&location.rel)
    }

    #[cfg(test)]
    fn run_before_open(&self) {
        if let Some(hook) = self.before_open.lock().unwrap().as_mut() {
            hook();
        }
    }
}

/// Open `rel` beneath `dir` one folder at a time, following no symlink.
pub(crate) fn open_dir_nofollow(dir: &Dir, rel: &Path) -> std::io::Result<Dir> {
    let mut current = dir.try_clone()?;
    for component in rel.components() {
        if let Component::Normal(name) = component {
            current = current.open_dir_nofollow(name)?;
        }
    }
    Ok(current)
}

/// A path that resolved a moment ago no longer opens the same way: something changed.
fn changed(e: std::io::Error, shown: &str) -> Error {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => Error::NotFound { path: shown.into() },
        NotADirectory => Error::Changed { path: shown.into() },
        _ if is_loop(&e) => Error::Changed { path: shown.into() },
        _ => io_error(e, shown, "open"),
    }
}

/// `ELOOP` (`io::ErrorKind::FilesystemLoop` is not stable yet).
fn is_loop(e: &std::io::Error) -> bool {
    // Linux 40, Darwin 62
    matches!(e.raw_os_error(), Some(40) if cfg!(target_os = "linux"))
        || matches!(e.raw_os_error(), Some(62) if cfg!(target_vendor = "apple"))
}

/// An error of resolving or opening, in the sandbox's words.
pub(crate) fn io_error(e: std::io::Error, shown: &str, action: &'static str) -> Error {
    use std::io::ErrorKind::*;
    let path = shown.to_string();
    match e.kind() {
        // cap-std's own refusal carries no OS error: "a path led outside of the filesystem"
        PermissionDenied if e.raw_os_error().is_none() => Error::OutsideGrants { path, hint: None },
        NotFound | NotADirectory => Error::NotFound { path },
        InvalidFilename => Error::PathTooLong {
            path,
            limit: MAX_PATH_BYTES,
            name_limit: MAX_NAME_BYTES,
        },
        _ if is_loop(&e) => Error::SymlinkLoop { path },
        _ => Error::Io {
            action,
            path,
            source: e,
        },
    }
}

/// `path` canonical if it exists, else its parent canonical joined with its name, else as
/// given (made absolute): a private path that does not exist yet is still recognised.
fn canonical_or_lexical(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or(absolute),
        _ => absolute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A symlink swapped in between the check and the open is not followed: the open runs
    /// on the checked, canonical path with no symlink allowed, beneath cap-std's handle.
    #[test]
    fn a_symlink_swapped_in_after_the_check_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let grant = tmp.path().join("grant");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(grant.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(grant.join("sub/a.txt"), "inside").unwrap();
        std::fs::write(outside.join("a.txt"), "SECRET").unwrap();
        let sandbox = Sandbox::new(&[GrantSpec::read_only(&grant)], &[]).unwrap();

        // the file itself becomes a symlink to a file outside
        let location = sandbox.locate("grant/sub/a.txt").unwrap();
        let (g, o) = (grant.clone(), outside.clone());
        *sandbox.before_open.lock().unwrap() = Some(Box::new(move || {
            std::fs::remove_file(g.join("sub/a.txt")).unwrap();
            symlink(o.join("a.txt"), g.join("sub/a.txt")).unwrap();
        }));
        let e = sandbox.open_file(&location).unwrap_err();
        assert_eq!(e.code(), "changed_while_opening", "{e}");

        // a folder on the way becomes a symlink to a folder outside
        std::fs::remove_file(grant.join("sub/a.txt")).unwrap();
        std::fs::write(grant.join("sub/a.txt"), "inside").unwrap();
        let location = sandbox.locate("grant/sub/a.txt").unwrap();
        let (g, o) = (grant.clone(), outside.clone());
        *sandbox.before_open.lock().unwrap() = Some(Box::new(move || {
            std::fs::rename(g.join("sub"), g.join("old")).unwrap();
            symlink(&o, g.join("sub")).unwrap();
        }));
        // the swap happens after the parent folder was opened by handle: the open reads the
        // real file through that handle, never the one outside
        let read = sandbox.open_file(&location).map(|(mut f, _)| {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut f, &mut s).unwrap();
            s
        });
        match read {
            Ok(text) => assert_eq!(text, "inside"),
            Err(e) => assert_eq!(e.code(), "changed_while_opening"),
        }
        // and once swapped, the folder symlink is refused at resolution
        *sandbox.before_open.lock().unwrap() = None;
        let e = sandbox.locate("grant/sub/a.txt").unwrap_err();
        assert_eq!(e.code(), "outside_grants", "{e}");

        // a folder swapped before the folder is opened
        let location = sandbox.locate("grant/old").unwrap();
        let (g, o) = (grant.clone(), outside.clone());
        *sandbox.before_open.lock().unwrap() = Some(Box::new(move || {
            std::fs::rename(g.join("old"), g.join("old2")).unwrap();
            symlink(&o, g.join("old")).unwrap();
        }));
        let e = sandbox.open_dir(&location).unwrap_err();
        assert_eq!(e.code(), "changed_while_opening", "{e}");
    }
}
