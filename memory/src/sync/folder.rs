//! The sync folder's files. Layout, under the folder the user chose:
//!
//! ```text
//! companion-sync/<device>/seg-00000001.jsonl       a segment: changes, immutable once written
//! companion-sync/<device>/snapshot-00000040.jsonl  every row's state when segment 40 was the last
//! companion-sync/<device>/progress.json            what this device has applied of the others'
//! ```
//!
//! A device writes only in its own directory. A segment or snapshot is a header line, then one
//! record per line; the header holds the format version, the writer, the number, the record
//! count and the sha256 of everything after the header line, so a file that a cloud service
//! delivered half-written or damaged is recognised and left for a later round. Files are
//! written under a temporary name and renamed, so this device never shows a partial file;
//! cloud copies ("seg-00000003 2.jsonl", "… (conflicted copy).jsonl") are read like the
//! original, by their header.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::record::Record;

/// The format this Companion writes and the newest it reads.
pub const FORMAT: u32 = 1;

/// The directory under the user's folder.
pub const ROOT: &str = "companion-sync";

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    /// Changes: segment `n`.
    Segment(u64),
    /// The whole state as of segment `n` of its writer.
    Snapshot(u64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub companion_sync: u32,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
    pub records: u64,
    pub sha256: String,
}

impl Header {
    pub fn file_kind(&self) -> Option<FileKind> {
        match (self.segment, self.snapshot) {
            (Some(n), None) => Some(FileKind::Segment(n)),
            (None, Some(n)) => Some(FileKind::Snapshot(n)),
            _ => None,
        }
    }
}

/// A device's progress file: how far it has applied each writer's segments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub companion_sync: u32,
    pub device: String,
    /// Writer device → every segment up to this one applied.
    pub through: std::collections::BTreeMap<String, u64>,
    /// When it was written (the writer's wall clock, ms).
    pub written_at: i64,
    /// A random value new at each write, which the writing database remembers: another copy
    /// of that database finds one it did not write (`sync::identity`). Absent from files of
    /// older Companions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<String>,
}

/// The file name of `kind`.
pub fn file_name(kind: FileKind) -> String {
    match kind {
        FileKind::Segment(n) => format!("seg-{n:08}.jsonl"),
        FileKind::Snapshot(n) => format!("snapshot-{n:08}.jsonl"),
    }
}

/// What a name in a device directory says it is, cloud copies included; `None` for other
/// files (the progress file, temporary files, anything a user or another tool put there).
pub fn parse_name(name: &str) -> Option<FileKind> {
    if !name.ends_with(".jsonl") || name.starts_with('.') {
        return None;
    }
    let digits = |rest: &str| -> Option<u64> {
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    if let Some(rest) = name.strip_prefix("seg-") {
        return digits(rest).map(FileKind::Segment);
    }
    if let Some(rest) = name.strip_prefix("snapshot-") {
        return digits(rest).map(FileKind::Snapshot);
    }
    None
}

/// A device id as it may appear as a directory name: 16 lowercase hex digits.
pub fn is_device_id(s: &str) -> bool {
    s.len() == 16
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Encode a file: header line, then the records.
pub fn encode(device: &str, kind: FileKind, records: &[Record]) -> Vec<u8> {
    let mut body = Vec::new();
    for r in records {
        // a record is plain data: serializing it cannot fail
        body.extend(serde_json::to_vec(r).unwrap_or_default());
        body.push(b'\n');
    }
    let (segment, snapshot) = match kind {
        FileKind::Segment(n) => (Some(n), None),
        FileKind::Snapshot(n) => (None, Some(n)),
    };
    let header = Header {
        companion_sync: FORMAT,
        device: device.to_string(),
        segment,
        snapshot,
        records: records.len() as u64,
        sha256: hex(&Sha256::digest(&body)),
    };
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    out.extend(body);
    out
}

/// Why a file could not be read (yet).
#[derive(Debug, Clone, PartialEq)]
pub enum Unreadable {
    /// Damaged or not yet complete: read again in a later round.
    Damaged(String),
    /// Written by a newer Companion: applied once this one is updated.
    NewerFormat(u32),
}

/// Decode a file; the header alone when `header_only`.
pub fn decode(bytes: &[u8], newest_format: u32) -> Result<(Header, Vec<Record>), Unreadable> {
    let damaged = |why: String| Unreadable::Damaged(why);
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| damaged("no header line (the file is incomplete)".into()))?;
    // the format is read on its own first: a newer header may not parse as this one
    let version: serde_json::Value = serde_json::from_slice(&bytes[..newline])
        .map_err(|e| damaged(format!("unreadable header: {e}")))?;
    let format = version
        .get("companion_sync")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| damaged("not a Companion sync file".into()))?;
    if format > newest_format as u64 {
        return Err(Unreadable::NewerFormat(
            u32::try_from(format).unwrap_or(u32::MAX),
        ));
    }
    let header: Header =
        serde_json::from_value(version).map_err(|e| damaged(format!("unreadable header: {e}")))?;
    if header.file_kind().is_none() || !is_device_id(&header.device) {
        return Err(damaged("a header without a valid device and number".into()));
    }
    let body = &bytes[newline + 1..];
    if hex(&Sha256::digest(body)) != header.sha256 {
        return Err(damaged(
            "its checksum does not match (incomplete or damaged)".into(),
        ));
    }
    let mut records = Vec::with_capacity(header.records.min(1 << 20) as usize);
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let record: Record = serde_json::from_slice(line)
            .map_err(|e| damaged(format!("record {} is unreadable: {e}", i + 1)))?;
        records.push(record);
    }
    if records.len() as u64 != header.records {
        return Err(damaged(format!(
            "it holds {} records where its header says {}",
            records.len(),
            header.records
        )));
    }
    Ok((header, records))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The folder's file operations, so that a test can fail any of them (a kill mid-round).
pub trait FolderIo: Send + Sync {
    /// Names of the entries of `dir` (empty when it does not exist).
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>>;
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
    /// The size of the file at `path`, in bytes.
    fn size(&self, path: &Path) -> std::io::Result<u64>;
    /// Write `bytes` to `path` whole or not at all (a temporary file renamed over it).
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()>;
    fn remove(&self, path: &Path) -> std::io::Result<()>;
}

/// The operating system's files.
pub struct OsFolder;

impl FolderIo for OsFolder {
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        match std::fs::read_dir(dir) {
            Ok(entries) => Ok(entries
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn size(&self, path: &Path) -> std::io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let tmp: PathBuf = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        // the rename itself survives power loss once the directory is synced
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::clock::Stamp;

    fn record() -> Record {
        Record::Deleted {
            of: crate::sync::record::Kind::Note,
            uid: "n1".into(),
            at: Stamp::new(7, "0123456789abcdef"),
        }
    }

    #[test]
    fn a_file_round_trips() {
        let bytes = encode("0123456789abcdef", FileKind::Segment(3), &[record()]);
        let (header, records) = decode(&bytes, FORMAT).unwrap();
        assert_eq!(header.file_kind(), Some(FileKind::Segment(3)));
        assert_eq!(records, vec![record()]);
    }

    #[test]
    fn a_truncated_or_altered_file_is_damaged() {
        let bytes = encode(
            "0123456789abcdef",
            FileKind::Segment(3),
            &[record(), record()],
        );
        for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(matches!(
                decode(&bytes[..cut], FORMAT),
                Err(Unreadable::Damaged(_))
            ));
        }
        let mut altered = bytes.clone();
        let last = altered.len() - 3;
        altered[last] ^= 1;
        assert!(matches!(
            decode(&altered, FORMAT),
            Err(Unreadable::Damaged(_))
        ));
    }

    #[test]
    fn a_newer_format_waits() {
        let bytes = br#"{"companion_sync":2,"anything":"new"}
whatever"#;
        assert_eq!(decode(bytes, FORMAT), Err(Unreadable::NewerFormat(2)));
    }

    #[test]
    fn cloud_copies_are_recognised_by_name() {
        assert_eq!(parse_name("seg-00000003.jsonl"), Some(FileKind::Segment(3)));
        assert_eq!(
            parse_name("seg-00000003 2.jsonl"),
            Some(FileKind::Segment(3))
        );
        assert_eq!(
            parse_name("snapshot-00000040 (conflicted copy).jsonl"),
            Some(FileKind::Snapshot(40))
        );
        assert_eq!(parse_name(".seg-00000003.jsonl.12.tmp"), None);
        assert_eq!(parse_name("progress.json"), None);
        assert_eq!(parse_name("seg-.jsonl"), None);
    }
}
