//! A 1 GB file (sparse: text at both ends, a hole between) is read with bounded memory: a
//! read costs one window wherever it is, and a search stops at the first binary block. Its
//! own test binary, so the resident-memory figure is this test's alone.

use crate::common::{DENY, FakeHost, Rig};
use agent::{GrantSpec, Limits, RememberedApprovals, Sandbox};
use serde_json::json;

const GIB: u64 = 1 << 30;

fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

#[test]
fn a_one_gigabyte_file_is_read_and_searched_in_bounded_memory() {
    use std::io::{Seek, SeekFrom, Write};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("huge.txt");
    {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&b"the first lines speak of tomatoes\n".repeat(1000))
            .unwrap();
        f.seek(SeekFrom::Start(GIB - 4096)).unwrap();
        let tail = b"the last lines speak of basil\n".repeat(200);
        f.write_all(&tail[..4096]).unwrap();
        assert_eq!(f.metadata().unwrap().len(), GIB);
    }
    let s = Sandbox::new(&[GrantSpec::read_only(tmp.path())], &[]).unwrap();
    let (host, r) = (FakeHost::default(), RememberedApprovals::new());
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let before = rss_bytes();

    let out = rig.call("read_file", json!({"path": "huge.txt"})).unwrap();
    assert!(out.truncated);
    assert!(out.text_for_model.contains("tomatoes"));
    assert!(
        out.text_for_model.contains("read_file with offset"),
        "{}",
        out.text_for_model
    );
    let read = out.data["bytesRead"].as_u64().unwrap();
    assert!(read <= 8192 + 4096 + 3, "read {read} bytes for one window");
    assert_eq!(out.data["total"].as_u64(), Some(GIB));

    // the end, in one window
    let out = rig
        .call(
            "read_file",
            json!({"path": "huge.txt", "offset": GIB - 4000, "length": 16384}),
        )
        .unwrap();
    assert!(out.text_for_model.contains("basil"));
    assert!(out.text_for_model.ends_with("[end of file]"));
    assert!(out.data["bytesRead"].as_u64().unwrap() <= 8192 + 4000);

    // the hole is not text
    let e = rig
        .call("read_file", json!({"path": "huge.txt", "offset": GIB / 2}))
        .unwrap_err();
    assert_eq!(e.code(), "not_text");

    // a search reads up to the hole, finds the first lines, and says the rest is not text
    let out = rig
        .call("search_files", json!({"query": "tomatoes"}))
        .unwrap();
    assert_eq!(
        out.data["matches"][0]["path"],
        json!(format!("{}/huge.txt", s.grants()[0].name))
    );
    assert!(out.data["bytesRead"].as_u64().unwrap() < 1 << 20);
    assert!(
        out.text_for_model.contains("not text were skipped"),
        "{}",
        out.text_for_model
    );

    // the turn's budget counts it all, far below a gigabyte
    assert!(rig.budget.used() < 1 << 20, "{}", rig.budget.used());
    if let (Some(before), Some(after)) = (before, rss_bytes()) {
        assert!(
            after.saturating_sub(before) < 64 << 20,
            "resident memory grew by {} bytes",
            after - before
        );
    }
}
