//! From the path a tool was given to a granted folder and a path relative to it — lexical
//! work only, before anything touches the file system. What the relative path then reaches
//! is decided by cap-std, beneath the granted folder's handle (see `mod.rs`).
//!
//! A tool's path is one of:
//! - `NAME/rest`, where `NAME` is a granted folder's name (what list_folder and every result
//!   show);
//! - `rest` alone when exactly one folder is granted;
//! - an absolute path (or `~/…`) that lies inside a granted folder, as the user granted it or
//!   as its canonical location (a granted symlink is known by both); the longest match wins.
//!
//! Anything else is `outside the granted folders`. `..` is not resolved here: it goes to cap-std
//! with the rest, which refuses it where it would climb out of the folder.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The longest path a tool accepts, in bytes (Linux's `PATH_MAX`), and the longest name in it
/// (`NAME_MAX`): longer ones are refused before any system call.
pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_NAME_BYTES: usize = 255;

/// What [`split`] needs to know of a grant.
pub(crate) struct GrantPaths<'a> {
    pub name: &'a str,
    /// As granted, made absolute.
    pub given: &'a Path,
    /// Canonical (symlinks resolved).
    pub root: &'a Path,
}

/// A path as a message shows it: cut short when very long.
pub(crate) fn shown(path: &str) -> String {
    const SHOWN_CHARS: usize = 160;
    if path.chars().count() <= SHOWN_CHARS {
        path.to_string()
    } else {
        let head: String = path.chars().take(SHOWN_CHARS).collect();
        format!("{head}…")
    }
}

/// The grant (an index into `grants`) and the path relative to it.
pub(crate) fn split(
    input: &str,
    grants: &[GrantPaths<'_>],
    home: Option<&Path>,
) -> Result<(usize, PathBuf)> {
    if grants.is_empty() {
        return Err(Error::NoGrant);
    }
    let trimmed = input.trim();
    check_lengths(trimmed)?;
    if trimmed.contains('\0') {
        return Err(Error::NotFound {
            path: shown(trimmed),
        });
    }
    let expanded;
    let path = match (trimmed.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => {
            expanded = home.join(rest);
            expanded.as_path()
        }
        _ => Path::new(trimmed),
    };
    if path.is_absolute() {
        let best = grants
            .iter()
            .enumerate()
            .flat_map(|(i, g)| [(i, g.root), (i, g.given)])
            .filter_map(|(i, base)| Some((i, base, path.strip_prefix(base).ok()?)))
            .max_by_key(|(_, base, _)| base.components().count());
        return match best {
            Some((i, _, rest)) => Ok((i, rest.to_path_buf())),
            None => Err(outside(trimmed, grants)),
        };
    }
    let mut components = path.components();
    let first = loop {
        match components.next() {
            Some(Component::CurDir) => continue,
            other => break other,
        }
    };
    let named = match first {
        Some(Component::Normal(name)) => grants.iter().position(|g| OsStr::new(g.name) == name),
        _ => None,
    };
    match named {
        Some(i) => Ok((i, components.as_path().to_path_buf())),
        None if grants.len() == 1 => Ok((0, path.to_path_buf())),
        None => Err(outside(trimmed, grants)),
    }
}

fn outside(path: &str, grants: &[GrantPaths<'_>]) -> Error {
    let names: Vec<&str> = grants.iter().map(|g| g.name).collect();
    Error::OutsideGrants {
        path: shown(path),
        hint: Some(format!(
            "paths start with a granted folder's name: {}",
            names.join(", ")
        )),
    }
}

fn check_lengths(path: &str) -> Result<()> {
    let too_long =
        path.len() > MAX_PATH_BYTES || path.split('/').any(|name| name.len() > MAX_NAME_BYTES);
    if too_long {
        return Err(Error::PathTooLong {
            path: shown(path),
            limit: MAX_PATH_BYTES,
            name_limit: MAX_NAME_BYTES,
        });
    }
    Ok(())
}

/// A name that starts with a dot (other than `.` and `..`, which are not names).
pub(crate) fn is_hidden(name: &OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

/// The first hidden name among `path`'s components.
pub(crate) fn hidden_component(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c, Component::Normal(name) if is_hidden(name)))
}

/// `path` without `.` components (what cap-std's canonical form may start with).
pub(crate) fn clean(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// `NAME/rel` with `/` separators: how results name a file.
pub(crate) fn display(grant: &str, rel: &Path) -> String {
    let mut out = grant.to_string();
    for c in rel.components() {
        if let Component::Normal(name) = c {
            out.push('/');
            out.push_str(&name.to_string_lossy());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants() -> Vec<(String, PathBuf, PathBuf)> {
        vec![
            ("docs".into(), "/home/u/link".into(), "/data/docs".into()),
            (
                "photos".into(),
                "/home/u/photos".into(),
                "/home/u/photos".into(),
            ),
            (
                "2024".into(),
                "/home/u/photos/2024".into(),
                "/home/u/photos/2024".into(),
            ),
        ]
    }

    fn run(input: &str, n: usize) -> Result<(usize, PathBuf)> {
        let g = grants();
        let paths: Vec<GrantPaths<'_>> = g[..n]
            .iter()
            .map(|(name, given, root)| GrantPaths { name, given, root })
            .collect();
        split(input, &paths, Some(Path::new("/home/u")))
    }

    #[test]
    fn names_and_absolute_paths_map_to_their_grant() {
        assert_eq!(run("docs/a/b.txt", 3).unwrap(), (0, "a/b.txt".into()));
        assert_eq!(run("./photos", 3).unwrap(), (1, "".into()));
        // by the path as granted (a symlink) and by its canonical location
        assert_eq!(run("/home/u/link/x.md", 3).unwrap(), (0, "x.md".into()));
        assert_eq!(run("/data/docs/x.md", 3).unwrap(), (0, "x.md".into()));
        assert_eq!(run("~/photos/cat.jpg", 3).unwrap(), (1, "cat.jpg".into()));
        // the longest grant wins
        assert_eq!(
            run("/home/u/photos/2024/a.jpg", 3).unwrap(),
            (2, "a.jpg".into())
        );
        // `..` is left for cap-std to refuse
        assert_eq!(run("/data/docs/../etc", 3).unwrap(), (0, "../etc".into()));
    }

    #[test]
    fn a_single_grant_takes_bare_relative_paths() {
        assert_eq!(run("notes/a.txt", 1).unwrap(), (0, "notes/a.txt".into()));
        assert_eq!(run("docs/a.txt", 1).unwrap(), (0, "a.txt".into()));
        let e = run("notes/a.txt", 3).unwrap_err();
        assert_eq!(e.code(), "outside_grants");
        assert!(e.to_string().contains("docs, photos, 2024"), "{e}");
    }

    #[test]
    fn what_is_not_in_a_grant_is_refused() {
        for p in ["/etc/passwd", "/data/docsx/a", "/home/u", "/"] {
            let e = run(p, 3).unwrap_err();
            assert_eq!(e.code(), "outside_grants", "{p}");
            assert!(
                e.to_string().starts_with("outside the granted folders"),
                "{e}"
            );
        }
        assert_eq!(run("a", 0).unwrap_err().code(), "no_grant");
    }

    #[test]
    fn overlong_paths_and_names_are_refused_before_any_system_call() {
        let name = "n".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(
            run(&format!("docs/{name}"), 3).unwrap_err().code(),
            "path_too_long"
        );
        let long = format!("docs/{}", ["d"; 3000].join("/"));
        let e = run(&long, 3).unwrap_err();
        assert_eq!(e.code(), "path_too_long");
        assert!(e.to_string().len() < 400, "the message stays short");
    }

    #[test]
    fn hidden_names_and_display() {
        assert!(hidden_component(Path::new("a/.git/config")));
        assert!(!hidden_component(Path::new("a/../b/./c")));
        assert_eq!(display("docs", Path::new("a/b.txt")), "docs/a/b.txt");
        assert_eq!(display("docs", Path::new("")), "docs");
        assert_eq!(clean(Path::new("./a/./b")), PathBuf::from("a/b"));
    }
}
