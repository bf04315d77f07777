//! How much memory the system has and how much this process may still use: Linux
//! `/proc/meminfo` (`MemTotal`, `MemAvailable`, the kernel's own estimate of memory usable
//! without swapping); iOS `os_proc_available_memory()` (<os/proc.h>, iOS 13+: what this app
//! may still allocate before the OS ends it); macOS the host's free, inactive, purgeable and
//! speculative pages (`host_statistics64`, what Activity Monitor counts as reclaimable).
//! `COMPANION_AVAILABLE_MEMORY` (bytes, or with a K/M/G suffix in binary units) simulates a
//! smaller device.

use serde::{Deserialize, Serialize};

pub const AVAILABLE_MEMORY_ENV: &str = "COMPANION_AVAILABLE_MEMORY";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMemory {
    pub total_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    /// The available figure was simulated (`COMPANION_AVAILABLE_MEMORY` or the config).
    pub simulated: bool,
}

/// `"512M"`, `"2G"`, `"1048576"` → bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 10),
        (i, 'm' | 'M') => (&t[..i], 20),
        (i, 'g' | 'G') => (&t[..i], 30),
        _ => (t, 0),
    };
    let value: f64 = digits.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| (value * (1u64 << shift) as f64) as u64)
}

/// The system's memory; `simulated_available` (the config's) wins over the environment,
/// which wins over the OS.
pub fn system_memory(simulated_available: Option<u64>) -> SystemMemory {
    let env = std::env::var(AVAILABLE_MEMORY_ENV)
        .ok()
        .and_then(|v| parse_size(&v));
    let (total, available) = os_memory();
    match simulated_available.or(env) {
        Some(a) => SystemMemory {
            total_bytes: total,
            available_bytes: Some(a),
            simulated: true,
        },
        None => SystemMemory {
            total_bytes: total,
            available_bytes: available,
            simulated: false,
        },
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn os_memory() -> (Option<u64>, Option<u64>) {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return (None, None);
    };
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("MemTotal:"), field("MemAvailable:"))
}

#[cfg(any(target_os = "macos", target_os = "ios"))]
fn hw_memsize() -> Option<u64> {
    let mut value: u64 = 0;
    let mut len = std::mem::size_of::<u64>();
    // SAFETY: `hw.memsize` is a u64; the buffer and its length describe `value`.
    let rc = unsafe {
        libc::sysctlbyname(
            c"hw.memsize".as_ptr(),
            (&mut value as *mut u64).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0).then_some(value)
}

#[cfg(target_os = "ios")]
fn os_memory() -> (Option<u64>, Option<u64>) {
    unsafe extern "C" {
        fn os_proc_available_memory() -> usize;
    }
    // SAFETY: no arguments; returns 0 when the process has no memory limit to report.
    let available = unsafe { os_proc_available_memory() } as u64;
    (hw_memsize(), (available > 0).then_some(available))
}

#[cfg(target_os = "macos")]
#[allow(deprecated)] // libc points to the mach2 crate for these; the calls are the same
fn os_memory() -> (Option<u64>, Option<u64>) {
    let mut stats: libc::vm_statistics64 = unsafe { std::mem::zeroed() };
    let mut count = libc::HOST_VM_INFO64_COUNT;
    // SAFETY: `stats` is a vm_statistics64 and `count` its size in integers, as
    // host_statistics64(HOST_VM_INFO64) requires.
    let rc = unsafe {
        libc::host_statistics64(
            libc::mach_host_self(),
            libc::HOST_VM_INFO64,
            (&mut stats as *mut libc::vm_statistics64).cast(),
            &mut count,
        )
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let available = (rc == libc::KERN_SUCCESS && page > 0).then(|| {
        let pages = stats.free_count as u64
            + stats.inactive_count as u64
            + stats.purgeable_count as u64
            + stats.speculative_count as u64;
        pages * page as u64
    });
    (hw_memsize(), available)
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
)))]
fn os_memory() -> (Option<u64>, Option<u64>) {
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size(" 1.5g "), Some(3 << 29));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_reports_total_and_available() {
        let m = system_memory(None);
        if std::env::var_os(AVAILABLE_MEMORY_ENV).is_none() {
            assert!(!m.simulated);
        }
        let (total, available) = (m.total_bytes.unwrap(), m.available_bytes.unwrap());
        assert!(total > 0 && available <= total);
        let s = system_memory(Some(1234));
        assert_eq!((s.available_bytes, s.simulated), (Some(1234), true));
    }
}
