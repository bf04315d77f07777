//! A test-only SQLite VFS, `crash`, that wraps the default (unix) VFS and models what a disk
//! keeps through a power loss: a file's writes and truncations are held in memory until the
//! file is synced (`xSync`), and only then reach the real file. Reads see the held writes, as
//! they would see the page cache. Creating a journal or WAL file, and deleting a file, are
//! directory changes that last only once the directory is synced — which the unix VFS does on
//! the first sync of a new journal or WAL (`UNIXFILE_DIRSYNC` in os_unix.c), or when a delete
//! asks for it. [`power_off`] then loses what was not synced, either all of it or (the harder
//! case) a random subset of the held writes and a random prefix of the directory changes, as
//! a disk that reorders its writes would. The real files are then exactly what a machine
//! coming back up would find; they are read afterwards through SQLite's own default VFS.
//!
//! Locks and the WAL index (`-shm`, shared memory rebuilt after a crash) go straight to the
//! real file. Follows SQLite's "VFS shim" pattern (`ext/misc/vfstrace.c`, `src/test_vfs.c`).

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, MutexGuard, OnceLock};

use rusqlite::ffi;

use super::crash::{self, Rng};

pub const NAME: &str = "crash";

#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    Truncate(u64),
}

#[derive(Debug)]
enum DirOp {
    Created(String),
    Deleted(String, Vec<u8>),
}

#[derive(Default)]
struct State {
    /// Writes not yet synced, by path, in order.
    held: HashMap<String, Vec<Op>>,
    /// Directory changes not yet synced, in order.
    dir: Vec<DirOp>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    f(state().get_or_insert_with(State::default))
}

#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    real_words: usize,
    /// The path of a named file; temporary files (no name) pass straight through.
    path: *mut String,
    /// A new journal or WAL: its first sync also syncs the directory.
    dirsync: bool,
}

struct Vfs {
    base: *mut ffi::sqlite3_vfs,
    methods: ffi::sqlite3_io_methods,
}
unsafe impl Send for Vfs {}
unsafe impl Sync for Vfs {}

static VFS: OnceLock<Vfs> = OnceLock::new();

fn vfs() -> &'static Vfs {
    VFS.get().expect("registered")
}

/// Register the `crash` VFS (once per process).
pub fn register() {
    VFS.get_or_init(|| unsafe {
        let base = ffi::sqlite3_vfs_find(std::ptr::null());
        assert!(!base.is_null());
        let real_methods = ffi::sqlite3_io_methods {
            iVersion: 3,
            xClose: Some(x_close),
            xRead: Some(x_read),
            xWrite: Some(x_write),
            xTruncate: Some(x_truncate),
            xSync: Some(x_sync),
            xFileSize: Some(x_file_size),
            xLock: Some(x_lock),
            xUnlock: Some(x_unlock),
            xCheckReservedLock: Some(x_check_reserved_lock),
            xFileControl: Some(x_file_control),
            xSectorSize: Some(x_sector_size),
            xDeviceCharacteristics: Some(x_device_characteristics),
            xShmMap: Some(x_shm_map),
            xShmLock: Some(x_shm_lock),
            xShmBarrier: Some(x_shm_barrier),
            xShmUnmap: Some(x_shm_unmap),
            xFetch: Some(x_fetch),
            xUnfetch: Some(x_unfetch),
        };
        let mut ours: ffi::sqlite3_vfs = std::ptr::read(base);
        ours.zName = CString::new(NAME).unwrap().into_raw();
        ours.szOsFile = std::mem::size_of::<ShimFile>() as c_int;
        ours.xOpen = Some(x_open);
        ours.xDelete = Some(x_delete);
        ours.pNext = std::ptr::null_mut();
        let ours = Box::into_raw(Box::new(ours));
        assert_eq!(ffi::sqlite3_vfs_register(ours, 0), ffi::SQLITE_OK);
        Vfs {
            base,
            methods: real_methods,
        }
    });
}

/// Make everything durable as it stands (the end of a test's setup).
pub fn settle() {
    let held = with(|s| {
        s.dir.clear();
        std::mem::take(&mut s.held)
    });
    for (path, ops) in held {
        apply(&path, &ops);
    }
}

/// Lose power: unsynced writes are dropped (`partial`: each kept or dropped at random, as a
/// reordering disk may persist any of them) and unsynced directory changes undone (`partial`:
/// all but a random prefix of them). Call once every connection through this VFS is closed.
pub fn power_off(rng: &mut Rng, partial: bool) {
    let (held, dir) = with(|s| (std::mem::take(&mut s.held), std::mem::take(&mut s.dir)));
    for (path, ops) in held {
        if partial {
            let kept: Vec<Op> = ops.into_iter().filter(|_| rng.coin()).collect();
            apply(&path, &kept);
        }
    }
    let keep = if partial {
        rng.below(dir.len() as u64 + 1) as usize
    } else {
        0
    };
    for op in dir
        .into_iter()
        .skip(keep)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        match op {
            DirOp::Created(path) => {
                let _ = std::fs::remove_file(&path);
            }
            DirOp::Deleted(path, bytes) => std::fs::write(&path, bytes).unwrap(),
        }
    }
}

fn apply(path: &str, ops: &[Op]) {
    if ops.is_empty() {
        return;
    }
    let f = std::fs::OpenOptions::new().write(true).open(path);
    let Ok(f) = f else { return };
    for op in ops {
        match op {
            Op::Write(at, bytes) => f.write_all_at(bytes, *at).unwrap(),
            Op::Truncate(len) => f.set_len(*len).unwrap(),
        }
    }
}

unsafe fn shim<'a>(f: *mut ffi::sqlite3_file) -> &'a mut ShimFile {
    unsafe { &mut *(f as *mut ShimFile) }
}

unsafe fn real_methods(f: &ShimFile) -> &ffi::sqlite3_io_methods {
    unsafe { &*(*f.real).pMethods }
}

unsafe fn path_of(f: &ShimFile) -> Option<&String> {
    unsafe { f.path.as_ref() }
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    unsafe {
        let v = vfs();
        let words = ((*v.base).szOsFile as usize).div_ceil(8);
        let real = Box::into_raw(vec![0u64; words].into_boxed_slice()) as *mut ffi::sqlite3_file;
        let path = (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned());
        let existed = path
            .as_ref()
            .is_some_and(|p| std::path::Path::new(p).exists());
        let rc = ((*v.base).xOpen.unwrap())(v.base, name, real, flags, out_flags);
        let s = shim(file);
        if rc != ffi::SQLITE_OK {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                real as *mut u64,
                words,
            )));
            s.base.pMethods = std::ptr::null();
            return rc;
        }
        let journal =
            ffi::SQLITE_OPEN_WAL | ffi::SQLITE_OPEN_MAIN_JOURNAL | ffi::SQLITE_OPEN_SUPER_JOURNAL;
        let created = path.is_some() && !existed && flags & ffi::SQLITE_OPEN_CREATE != 0;
        if created && let Some(p) = &path {
            with(|st| st.dir.push(DirOp::Created(p.clone())));
        }
        *s = ShimFile {
            base: ffi::sqlite3_file {
                pMethods: &v.methods,
            },
            real,
            real_words: words,
            path: path.map_or(std::ptr::null_mut(), |p| Box::into_raw(Box::new(p))),
            dirsync: created && flags & journal != 0,
        };
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    unsafe {
        if crash::tick() {
            return ffi::SQLITE_IOERR_DELETE;
        }
        let path = CStr::from_ptr(name).to_string_lossy().into_owned();
        // what the disk still holds of it: its synced content (held writes die with it)
        let durable = std::fs::read(&path).ok();
        let v = vfs();
        let rc = ((*v.base).xDelete.unwrap())(v.base, name, 0);
        if rc == ffi::SQLITE_OK {
            with(|s| {
                s.held.remove(&path);
                if sync_dir != 0 {
                    s.dir.clear();
                } else if let Some(bytes) = durable {
                    s.dir.push(DirOp::Deleted(path, bytes));
                }
            });
        }
        rc
    }
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let s = shim(file);
        let rc = (real_methods(s).xClose.unwrap())(s.real);
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            s.real as *mut u64,
            s.real_words,
        )));
        if !s.path.is_null() {
            drop(Box::from_raw(s.path));
        }
        rc
    }
}

unsafe fn real_size(s: &ShimFile) -> Result<i64, c_int> {
    let mut size = 0i64;
    let rc = unsafe { (real_methods(s).xFileSize.unwrap())(s.real, &mut size) };
    if rc == ffi::SQLITE_OK {
        Ok(size)
    } else {
        Err(rc)
    }
}

fn logical_size(real: i64, ops: &[Op]) -> i64 {
    let mut size = real;
    for op in ops {
        match op {
            Op::Write(at, b) => size = size.max((*at + b.len() as u64) as i64),
            Op::Truncate(len) => size = *len as i64,
        }
    }
    size
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    off: i64,
) -> c_int {
    unsafe {
        let s = shim(file);
        let Some(path) = path_of(s) else {
            return (real_methods(s).xRead.unwrap())(s.real, buf, amt, off);
        };
        let ops = with(|st| st.held.get(path).cloned().unwrap_or_default());
        let rc = (real_methods(s).xRead.unwrap())(s.real, buf, amt, off);
        if rc != ffi::SQLITE_OK && rc != ffi::SQLITE_IOERR_SHORT_READ {
            return rc;
        }
        let out = std::slice::from_raw_parts_mut(buf as *mut u8, amt as usize);
        let (start, end) = (off as u64, off as u64 + amt as u64);
        for op in &ops {
            match op {
                Op::Write(at, bytes) => {
                    let (a, b) = ((*at).max(start), (*at + bytes.len() as u64).min(end));
                    if a < b {
                        out[(a - start) as usize..(b - start) as usize]
                            .copy_from_slice(&bytes[(a - at) as usize..(b - at) as usize]);
                    }
                }
                Op::Truncate(len) => {
                    if *len < end {
                        out[(*len).max(start).saturating_sub(start) as usize..].fill(0);
                    }
                }
            }
        }
        let size = match real_size(s) {
            Ok(r) => logical_size(r, &ops),
            Err(rc) => return rc,
        };
        if (end as i64) > size {
            let from = ((size - off).max(0) as usize).min(out.len());
            out[from..].fill(0);
            return ffi::SQLITE_IOERR_SHORT_READ;
        }
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: i64,
) -> c_int {
    unsafe {
        let s = shim(file);
        let Some(path) = path_of(s) else {
            return (real_methods(s).xWrite.unwrap())(s.real, buf, amt, off);
        };
        if crash::tick() {
            return ffi::SQLITE_IOERR_WRITE;
        }
        let bytes = std::slice::from_raw_parts(buf as *const u8, amt as usize).to_vec();
        with(|st| {
            st.held
                .entry(path.clone())
                .or_default()
                .push(Op::Write(off as u64, bytes))
        });
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    unsafe {
        let s = shim(file);
        let Some(path) = path_of(s) else {
            return (real_methods(s).xTruncate.unwrap())(s.real, size);
        };
        if crash::tick() {
            return ffi::SQLITE_IOERR_TRUNCATE;
        }
        with(|st| {
            st.held
                .entry(path.clone())
                .or_default()
                .push(Op::Truncate(size as u64))
        });
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    unsafe {
        let s = shim(file);
        let Some(path) = path_of(s).cloned() else {
            return ffi::SQLITE_OK;
        };
        if crash::tick() {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        // the synced data is what the real file holds from now on (no real fsync: nothing
        // real loses power here, and the tests stay fast)
        let ops = with(|st| {
            if s.dirsync {
                st.dir.clear();
            }
            st.held.remove(&path).unwrap_or_default()
        });
        s.dirsync = false;
        for op in ops {
            let rc = match op {
                Op::Write(at, bytes) => (real_methods(s).xWrite.unwrap())(
                    s.real,
                    bytes.as_ptr() as *const c_void,
                    bytes.len() as c_int,
                    at as i64,
                ),
                Op::Truncate(len) => (real_methods(s).xTruncate.unwrap())(s.real, len as i64),
            };
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    unsafe {
        let s = shim(file);
        let real = match real_size(s) {
            Ok(r) => r,
            Err(rc) => return rc,
        };
        let ops = path_of(s).map_or_else(Vec::new, |p| {
            with(|st| st.held.get(p).cloned().unwrap_or_default())
        });
        *out = logical_size(real, &ops);
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xLock.unwrap())(s.real, level)
    }
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xUnlock.unwrap())(s.real, level)
    }
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xCheckReservedLock.unwrap())(s.real, out)
    }
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    unsafe {
        let s = shim(file);
        // a size hint would grow the real file behind the held writes' back
        if op == ffi::SQLITE_FCNTL_SIZE_HINT || op == ffi::SQLITE_FCNTL_CHUNK_SIZE {
            return ffi::SQLITE_OK;
        }
        (real_methods(s).xFileControl.unwrap())(s.real, op, arg)
    }
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xSectorSize.unwrap())(s.real)
    }
}

unsafe extern "C" fn x_device_characteristics(_file: *mut ffi::sqlite3_file) -> c_int {
    // claim nothing (no atomic or safe-append writes): SQLite then relies on syncs alone
    0
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    pg: c_int,
    pgsz: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xShmMap.unwrap())(s.real, pg, pgsz, extend, out)
    }
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xShmLock.unwrap())(s.real, offset, n, flags)
    }
}

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    unsafe {
        let s = shim(file);
        (real_methods(s).xShmBarrier.unwrap())(s.real)
    }
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    unsafe {
        let s = shim(file);
        (real_methods(s).xShmUnmap.unwrap())(s.real, delete)
    }
}

unsafe extern "C" fn x_fetch(
    _file: *mut ffi::sqlite3_file,
    _off: i64,
    _amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // no memory-mapped reads: they would bypass the held writes
    unsafe { *out = std::ptr::null_mut() };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_unfetch(_file: *mut ffi::sqlite3_file, _off: i64, _p: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}
