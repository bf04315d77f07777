//! Huge pages under the mapped weights our CPU kernels multiply (Linux): after loading, a
//! background thread replaces the mapping's 4 KiB file pages, 2 MiB at a time, with anonymous
//! transparent huge pages holding the same bytes, at the same addresses.
//!
//! Why: decode streams every multiplied weight once per token (about 250 MB for Gemma 3 270M,
//! 178 MB of it the output projection), so it runs at the memory system's pace, and reading
//! through 4 KiB pages costs a page walk every 4 KiB (two-dimensional in a virtual machine).
//! Measured on the 2-core AVX-512 machine of these notes (a 178 MB stream, two threads,
//! software prefetch as our kernels do): mapped file 19.0 GB/s, anonymous 4 KiB pages
//! 17.9 GB/s, anonymous memory advised `MADV_HUGEPAGE` 33.6 GB/s. Decode rose from 47 to
//! 55-57 tok/s.
//!
//! Why in place and in the background: filling fresh huge pages took 120-760 ms for the 253 MB
//! file there (page faults and compaction in the VM), far more than the whole load (~0.3 s),
//! so loading keeps llama.cpp's way (`llama_mmap`: map, copy nothing) and the pages are swapped
//! afterwards. Each 2 MiB chunk is read with `pread` into a fresh huge page (so the file's pages
//! are not faulted into this process on the way), made read-only, and moved over the chunk with
//! `mremap(MREMAP_FIXED)`. The kernel does the move under the address space's write lock: a
//! reader on another thread sees the file page or the copy, which hold the same bytes, never a
//! hole. Slices handed out before stay valid, and the process's resident size stays the
//! weights once (the file pages of a chunk leave the mapping as its copy arrives).
//!
//! The cost: the copy is this process's own where the mapping shared the page cache with other
//! processes using the file. So it runs only where the kernel offers transparent huge pages
//! (`/sys/kernel/mm/transparent_hugepage/enabled` not `[never]`), on chunks that hold
//! multiplied weights (tables only gathered a row at a time, such as Gemma 4's per-layer
//! embeddings, stay mapped), at the lowest priority, and `COMPANION_HUGE_PAGES=0` turns it off
//! (also for comparisons). llama.cpp offers the opposite trade with `--no-mmap`.
//!
//! Prompt passes hold the move back ([`pause_moves`]): a prompt pass faults in fresh activation
//! buffers, each fault needs the address space's lock for reading, and every chunk's `mremap`
//! takes it for writing from a thread at the lowest priority, which the scheduler may leave
//! waiting while it holds the lock. The first 500-token prompt after loading prefilled at
//! 461-536 tok/s with the move running beside it and at 586-621 without; decode steps fault
//! nothing and run beside it.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memmap2::Mmap;

/// Huge-page size on x86-64 and on aarch64 with 4 KiB base pages.
const CHUNK: usize = 2 << 20;

/// What a promotion did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Promoted {
    /// 2 MiB chunks now on anonymous (huge) pages.
    pub chunks: usize,
    /// Chunks left mapped after an error (the first error ends the promotion).
    pub failed: bool,
}

/// Background moves started and not yet finished (see [`moves_pending`]).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Whether a background move is still under way in this process: measurements of the steady
/// state (`companion bench`) wait for it.
pub fn moves_pending() -> bool {
    RUNNING.load(Ordering::SeqCst) > 0
}

/// Prompt passes in progress (see [`pause_moves`]).
static PAUSES: AtomicUsize = AtomicUsize::new(0);

/// While the returned guard lives, the background move starts no new chunk (see the module
/// docs); a chunk already being moved finishes first.
pub(crate) fn pause_moves() -> MovesPaused {
    PAUSES.fetch_add(1, Ordering::SeqCst);
    MovesPaused(())
}

/// Holds the background move back until dropped.
#[must_use = "the move resumes as soon as the guard is dropped"]
pub(crate) struct MovesPaused(());

impl Drop for MovesPaused {
    fn drop(&mut self) {
        PAUSES.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits until no prompt pass holds the move back.
fn wait_while_paused() {
    while PAUSES.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether to promote: Linux with transparent huge pages offered, not turned off by the user.
pub(crate) fn wanted() -> bool {
    if std::env::var("COMPANION_HUGE_PAGES").is_ok_and(|v| v == "0") {
        return false;
    }
    huge_pages_offered()
}

#[cfg(target_os = "linux")]
fn huge_pages_offered() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| !s.contains("[never]"))
}

/// macOS and iOS have no transparent huge pages (and Apple silicon's 16 KiB pages reach four
/// times as far): the weights stay mapped there.
#[cfg(not(target_os = "linux"))]
fn huge_pages_offered() -> bool {
    false
}

/// Promotes, on a background thread at the lowest priority, every whole 2 MiB chunk of `map`
/// (the whole of `file`, mapped from offset 0) that overlaps one of `ranges` (file byte
/// ranges `(start, len)`).
pub(crate) fn promote_in_background(map: Arc<Mmap>, file: File, ranges: Vec<(usize, usize)>) {
    RUNNING.fetch_add(1, Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name("companion-huge-pages".into())
        .spawn(move || {
            // counted down however the move ends, a panic included
            struct Finished;
            impl Drop for Finished {
                fn drop(&mut self) {
                    RUNNING.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let _finished = Finished;
            lowest_priority();
            let t0 = std::time::Instant::now();
            let done = promote(&map, &file, &ranges);
            tracing::debug!(
                chunks = done.chunks,
                failed = done.failed,
                ms = t0.elapsed().as_millis() as u64,
                "weights moved to huge pages"
            );
        });
    if let Err(e) = spawned {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        tracing::debug!(error = %e, "no thread for huge pages; the weights stay mapped");
    }
}

/// [`promote_in_background`]'s work, on the calling thread.
pub(crate) fn promote(map: &Mmap, file: &File, ranges: &[(usize, usize)]) -> Promoted {
    let mut done = Promoted::default();
    let base = map.as_ptr() as usize;
    let first = base.next_multiple_of(CHUNK);
    let end = base + map.len();
    let mut chunk = first;
    while chunk + CHUNK <= end {
        let (lo, hi) = (chunk - base, chunk - base + CHUNK);
        if ranges.iter().any(|&(s, l)| s < hi && s + l > lo) {
            wait_while_paused();
            match promote_chunk(chunk, file, lo as u64) {
                Ok(()) => done.chunks += 1,
                Err(e) => {
                    tracing::debug!(error = %e, "a weight chunk stays mapped");
                    done.failed = true;
                    break;
                }
            }
        }
        chunk += CHUNK;
    }
    done
}

#[cfg(target_os = "linux")]
fn lowest_priority() {
    // SAFETY: plain syscalls on this thread's own id; a failure leaves the priority as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

#[cfg(not(target_os = "linux"))]
fn lowest_priority() {}

/// Replaces the mapping's chunk at address `at` (2 MiB aligned, inside the mapping) with an
/// anonymous huge page holding file bytes `offset..offset + CHUNK`.
#[cfg(target_os = "linux")]
fn promote_chunk(at: usize, file: &File, offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let os_err = std::io::Error::last_os_error;
    // SAFETY: each call below is checked; the staging chunk is ours alone until it is moved,
    // and the move replaces `at..at + CHUNK`, which lies inside the caller's mapping, with the
    // same bytes (see the module docs for why readers never see anything else).
    unsafe {
        // a 2 MiB-aligned anonymous chunk: map twice the size and trim both ends
        let raw = libc::mmap(
            std::ptr::null_mut(),
            2 * CHUNK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if raw == libc::MAP_FAILED {
            return Err(os_err());
        }
        let raw = raw as usize;
        let staging = raw.next_multiple_of(CHUNK);
        if staging > raw {
            libc::munmap(raw as *mut libc::c_void, staging - raw);
        }
        let tail = staging + CHUNK;
        if raw + 2 * CHUNK > tail {
            libc::munmap(tail as *mut libc::c_void, raw + 2 * CHUNK - tail);
        }
        let unmap_staging = || libc::munmap(staging as *mut libc::c_void, CHUNK);
        // only a hint: without it the chunk is still correct, on base pages
        libc::madvise(staging as *mut libc::c_void, CHUNK, libc::MADV_HUGEPAGE);
        let buf = std::slice::from_raw_parts_mut(staging as *mut u8, CHUNK);
        if let Err(e) = file.read_exact_at(buf, offset) {
            unmap_staging();
            return Err(e);
        }
        if libc::mprotect(staging as *mut libc::c_void, CHUNK, libc::PROT_READ) != 0 {
            let e = os_err();
            unmap_staging();
            return Err(e);
        }
        let moved = libc::mremap(
            staging as *mut libc::c_void,
            CHUNK,
            CHUNK,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            at as *mut libc::c_void,
        );
        if moved == libc::MAP_FAILED {
            let e = os_err();
            unmap_staging();
            // The kernel may have unmapped the destination before failing: map the file there
            // again (a no-op in effect when the old mapping is still in place).
            libc::mmap(
                at as *mut libc::c_void,
                CHUNK,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_FIXED,
                std::os::fd::AsRawFd::as_raw_fd(file),
                offset as libc::off_t,
            );
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn promote_chunk(_at: usize, _file: &File, _offset: u64) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "huge pages are promoted on Linux only",
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn sum(bytes: &[u8]) -> u64 {
        bytes.iter().map(|&b| b as u64).sum()
    }

    /// Kilobytes of the mapping at `addr` that `/proc/self/smaps` counts as anonymous.
    fn anonymous_kb(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut kb = 0;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((a, b)) = range.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = a <= addr && addr < b;
                continue;
            }
            if inside && let Some(v) = line.strip_prefix("Anonymous:") {
                kb += v
                    .trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        kb
    }

    /// `data` in a temporary file (kept while the directory lives), opened and mapped.
    fn mapped(data: &[u8]) -> (tempfile::TempDir, File, Arc<Mmap>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weights.bin");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(data)
            .unwrap();
        let file = File::open(&path).unwrap();
        // SAFETY: a private temporary file nobody changes.
        let map = Arc::new(unsafe { Mmap::map(&file) }.unwrap());
        (dir, file, map)
    }

    /// The bytes stay the same, for readers that run all along, and the promoted chunks are
    /// anonymous memory afterwards; chunks outside the given ranges stay file pages.
    #[test]
    fn promoted_chunks_keep_their_bytes_under_concurrent_readers() {
        let len = 5 * CHUNK + 12_345;
        let data: Vec<u8> = (0..len)
            .map(|i| ((i * 2654435761usize) >> 7) as u8)
            .collect();
        let (_dir, file, map) = mapped(&data);
        let want = sum(&data);
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (map, stop) = (map.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut passes = 0;
                    while !stop.load(Ordering::Relaxed) || passes == 0 {
                        assert_eq!(sum(&map), want, "a reader saw other bytes");
                        passes += 1;
                    }
                    passes
                })
            })
            .collect();
        let base = map.as_ptr() as usize;
        let first = base.next_multiple_of(CHUNK) - base;
        // a range in the second whole chunk only
        let done = promote(&map, &file, &[(first + CHUNK + 10, 100)]);
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(
            done,
            Promoted {
                chunks: 1,
                failed: false
            }
        );
        assert_eq!(&map[..], &data[..]);
        assert!(anonymous_kb(base + first + CHUNK) >= (CHUNK / 1024) as u64);
        assert_eq!(
            anonymous_kb(base + first),
            0,
            "a chunk outside the ranges moved"
        );
        // everything, then
        let all = promote(&map, &file, &[(0, len)]);
        assert!(all.chunks >= 4 && !all.failed, "{all:?}");
        assert_eq!(&map[..], &data[..]);
    }

    /// A held pause keeps every chunk in place; dropping it lets the move run.
    #[test]
    fn a_paused_move_waits_for_the_pause_to_end() {
        let data = vec![7u8; 3 * CHUNK];
        let (_dir, file, map) = mapped(&data);
        let base = map.as_ptr() as usize;
        let first = base.next_multiple_of(CHUNK) - base;
        let pause = pause_moves();
        let mover = {
            let map = map.clone();
            std::thread::spawn(move || promote(&map, &file, &[(first, 1)]))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!mover.is_finished(), "the move ran while paused");
        assert_eq!(anonymous_kb(base + first), 0, "a chunk moved while paused");
        drop(pause);
        assert_eq!(mover.join().unwrap().chunks, 1);
        assert!(anonymous_kb(base + first) >= (CHUNK / 1024) as u64);
        assert_eq!(&map[..], &data[..]);
    }
}
