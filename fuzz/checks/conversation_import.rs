//! A conversation export of any bytes imported into a store: refused with an error or imported
//! under a safe id, never a panic, and never a file outside the data folder.

use std::sync::{Mutex, OnceLock};

use memory::{SnapshotKey, Store};

struct Rig {
    dir: std::path::PathBuf,
    store: Store,
}

fn rig() -> &'static Mutex<Rig> {
    static R: OnceLock<Mutex<Rig>> = OnceLock::new();
    R.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("companion-fuzz-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let store = Store::open(dir.join("companion.db")).expect("store").store;
        Mutex::new(Rig { dir, store })
    })
}

pub fn check(data: &[u8]) {
    let Ok(json) = std::str::from_utf8(data) else {
        return;
    };
    let rig = rig().lock().unwrap_or_else(|p| p.into_inner());
    for new_id in [false, true] {
        if let Ok(imported) = rig.store.import_json(json, new_id) {
            let id = imported.id;
            let _ = rig.store.export_json(&id);
            let _ = rig.store.export_markdown(&id);
            // opening it would snapshot it: the file must land in the snapshot folder
            let key = SnapshotKey {
                model_sha256: "0".repeat(64),
                format_version: 3,
            };
            let _ = rig.store.save_snapshot(&id, &key, 1, b"snapshot");
            let _ = rig.store.delete_conversation(&id);
        }
    }
    // no snapshot file outside the snapshot folder: not in the data folder, not beside it
    for dir in [rig.dir.as_path(), rig.dir.parent().expect("parent")] {
        for entry in std::fs::read_dir(dir).expect("listing").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !(name.ends_with(".kv") || name.ends_with(".kv.tmp")),
                "a snapshot escaped its folder: {}",
                entry.path().display()
            );
        }
    }
}
