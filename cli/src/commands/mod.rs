pub mod agent;
pub mod bench;
pub mod bench_pacing;
pub mod chat;
pub mod chat_tools;
pub mod conversations;
pub mod doctor;
pub mod generate;
pub mod models;
pub mod score;
pub mod serve;
pub mod summarize;
pub mod sync;
pub mod tokenize;
pub mod tools;

/// Peak resident set size of this process (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
