//! An in-memory file system for the KV snapshot files (`memory::store::files::SnapshotFiles`)
//! that keeps, for each file, what is on the device (synced) apart from what the page cache
//! holds, and for each folder the entries made durable by a folder sync apart from the changes
//! since. [`CrashFiles::power_off`] keeps only what was durable — or, in the harder case, a
//! random prefix of the folder changes (a journaling file system commits them in order) and,
//! for each unsynced file, its old content, all its new content or a torn prefix of it.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use memory::store::files::SnapshotFiles;

use super::crash::{self, Rng};

#[derive(Debug, Clone, Default)]
struct Inode {
    durable: Vec<u8>,
    cached: Vec<u8>,
}

#[derive(Debug, Clone)]
enum Change {
    Link(PathBuf, usize),
    Rename(PathBuf, PathBuf),
    Unlink(PathBuf),
    MkDir(PathBuf),
}

impl Change {
    /// The folder whose entries this changes.
    fn folder(&self) -> Option<&Path> {
        match self {
            Change::Link(p, _) | Change::Unlink(p) | Change::MkDir(p) => p.parent(),
            Change::Rename(_, to) => to.parent(),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Tree {
    entries: HashMap<PathBuf, usize>,
    /// Folders made here; any other folder is taken to exist already.
    dirs: HashSet<PathBuf>,
}

impl Tree {
    fn apply(&mut self, change: &Change) {
        match change {
            Change::Link(p, inode) => {
                self.entries.insert(p.clone(), *inode);
            }
            Change::Rename(from, to) => {
                if let Some(inode) = self.entries.remove(from) {
                    self.entries.insert(to.clone(), inode);
                }
            }
            Change::Unlink(p) => {
                self.entries.remove(p);
            }
            Change::MkDir(p) => {
                self.dirs.insert(p.clone());
            }
        }
    }
}

#[derive(Debug, Default)]
struct Fs {
    inodes: Vec<Inode>,
    /// What the page cache shows.
    cached: Tree,
    /// What the device holds.
    durable: Tree,
    /// Folder changes not yet synced, in order.
    pending: Vec<Change>,
}

#[derive(Debug, Default)]
pub struct CrashFiles(Mutex<Fs>);

fn lost_power() -> io::Error {
    io::Error::other("simulated power loss")
}

impl CrashFiles {
    fn fs(&self) -> std::sync::MutexGuard<'_, Fs> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make everything durable as it stands.
    pub fn settle(&self) {
        let mut fs = self.fs();
        for inode in &mut fs.inodes {
            inode.durable = inode.cached.clone();
        }
        fs.durable = fs.cached.clone();
        fs.pending.clear();
    }

    /// Lose power; see the module docs.
    pub fn power_off(&self, rng: &mut Rng, partial: bool) {
        let mut fs = self.fs();
        let pending = std::mem::take(&mut fs.pending);
        let keep = if partial {
            rng.below(pending.len() as u64 + 1) as usize
        } else {
            0
        };
        for change in &pending[..keep] {
            fs.durable.apply(change);
        }
        for inode in &mut fs.inodes {
            if partial && inode.cached != inode.durable {
                match rng.below(3) {
                    0 => {}
                    1 => inode.durable = inode.cached.clone(),
                    _ => {
                        let n = rng.below(inode.cached.len() as u64 + 1) as usize;
                        inode.durable = inode.cached[..n].to_vec();
                    }
                }
            }
            inode.cached = inode.durable.clone();
        }
        // a folder whose creation was lost takes its entries with it
        let mut durable = fs.durable.clone();
        let lost: Vec<PathBuf> = fs
            .cached
            .dirs
            .iter()
            .filter(|d| !durable.dirs.contains(*d))
            .cloned()
            .collect();
        durable
            .entries
            .retain(|p, _| !lost.iter().any(|d| p.starts_with(d)));
        fs.durable = durable.clone();
        fs.cached = durable;
    }

    /// The names in `dir` as the device holds them (for the test's checks).
    pub fn durable_names(&self, dir: &Path) -> Vec<String> {
        let fs = self.fs();
        let mut names: Vec<String> = fs
            .durable
            .entries
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl SnapshotFiles for CrashFiles {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut fs = self.fs();
        if fs.cached.dirs.contains(dir) {
            return Ok(());
        }
        if crash::tick() {
            return Err(lost_power());
        }
        let change = Change::MkDir(dir.to_path_buf());
        fs.cached.apply(&change);
        fs.pending.push(change);
        Ok(())
    }

    fn write_synced(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        // two operations: the write (into the page cache), then the sync
        if crash::tick() {
            return Err(lost_power());
        }
        {
            let mut fs = self.fs();
            let inode = match fs.cached.entries.get(path) {
                Some(&i) => i,
                None => {
                    fs.inodes.push(Inode::default());
                    let i = fs.inodes.len() - 1;
                    let change = Change::Link(path.to_path_buf(), i);
                    fs.cached.apply(&change);
                    fs.pending.push(change);
                    i
                }
            };
            fs.inodes[inode].cached = bytes.to_vec();
        }
        if crash::tick() {
            return Err(lost_power());
        }
        let mut fs = self.fs();
        let inode = fs.cached.entries[path];
        fs.inodes[inode].durable = bytes.to_vec();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if crash::tick() {
            return Err(lost_power());
        }
        let mut fs = self.fs();
        if !fs.cached.entries.contains_key(from) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let change = Change::Rename(from.to_path_buf(), to.to_path_buf());
        fs.cached.apply(&change);
        fs.pending.push(change);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if crash::tick() {
            return Err(lost_power());
        }
        let mut fs = self.fs();
        let pending = std::mem::take(&mut fs.pending);
        let (now, later): (Vec<Change>, Vec<Change>) =
            pending.into_iter().partition(|c| c.folder() == Some(dir));
        for change in &now {
            fs.durable.apply(change);
        }
        fs.pending = later;
        Ok(())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if crash::crashed() {
            return Err(lost_power());
        }
        let fs = self.fs();
        match fs.cached.entries.get(path) {
            Some(&i) => Ok(fs.inodes[i].cached.clone()),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        if crash::tick() {
            return Err(lost_power());
        }
        let mut fs = self.fs();
        if !fs.cached.entries.contains_key(path) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let change = Change::Unlink(path.to_path_buf());
        fs.cached.apply(&change);
        fs.pending.push(change);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        if crash::crashed() {
            return Err(lost_power());
        }
        let fs = self.fs();
        Ok(fs
            .cached
            .entries
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect())
    }
}
