//! The settings file on disk: JSON `{"settings": {…}}`, the layout tauri-plugin-store wrote, so
//! a file saved by an earlier version reads as before. It is read with a fallback to the
//! defaults and a notice, and written atomically — a temporary file in the same folder, fsync,
//! rename over the old file, fsync of the folder, the way `rename(2)`-based editors and
//! SQLite's journal make a replacement durable — so a crash or a power loss during a save
//! leaves the old settings or the new ones, never a truncated file. (tauri-plugin-store's save
//! truncates the file and writes it in place, with no sync.)

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::settings::Settings;

const KEY: &str = "settings";

/// The saved settings, or the defaults: with no notice when nothing was saved yet, with one
/// when the file cannot be read or does not hold valid settings (the app still starts).
pub fn read(path: &Path) -> (Settings, Option<String>) {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (Settings::default(), None),
        Err(e) => {
            tracing::warn!(error = %e, "the settings file cannot be read");
            return (
                Settings::default(),
                Some(format!(
                    "Your settings could not be read ({e}); the defaults are used until you save new ones."
                )),
            );
        }
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        // an empty file or an empty store holds nothing saved yet
        Err(_) if bytes.iter().all(u8::is_ascii_whitespace) => (Settings::default(), None),
        Ok(serde_json::Value::Object(mut store)) => match store.remove(KEY) {
            None => (Settings::default(), None),
            Some(value) => match serde_json::from_value::<Settings>(value) {
                Ok(s) if s.validate().is_ok() => (s, None),
                _ => invalid(),
            },
        },
        _ => invalid(),
    }
}

fn invalid() -> (Settings, Option<String>) {
    tracing::warn!("the settings file does not hold valid settings; defaults used");
    (
        Settings::default(),
        Some(
            "Your saved settings were not valid; the defaults are used until you save new ones."
                .into(),
        ),
    )
}

/// Save `settings` to `path` atomically (see the module docs).
pub fn write(path: &Path, settings: &Settings) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(&serde_json::json!({ KEY: settings }))
        .map_err(io::Error::other)?;
    write_with(path, &bytes, |file, bytes| file.write_all(bytes))
}

/// [`write`] with the step that fills the temporary file given, so a test can make it fail
/// midway as a full disk or a crash would.
fn write_with(
    path: &Path,
    bytes: &[u8],
    fill: impl FnOnce(&mut File, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.json".into());
    let tmp = dir.join(format!(".{name}.tmp"));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        fill(&mut file, bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        sync_dir(&dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    // Windows cannot open a folder to sync it; NTFS journals its metadata
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom() -> Settings {
        Settings {
            temperature: 0.25,
            system_prompt: "Be brief.".into(),
            ..Settings::default()
        }
    }

    #[test]
    fn settings_round_trip_in_the_plugin_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        assert_eq!(
            read(&path),
            (Settings::default(), None),
            "nothing saved yet"
        );
        write(&path, &custom()).unwrap();
        assert_eq!(read(&path), (custom(), None));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["settings"]["systemPrompt"], "Be brief.");
    }

    /// A save that fails midway (a full disk; a crash is the same with the process gone) and a
    /// temporary file half-written by an earlier crash leave the old settings as they were.
    #[test]
    fn an_interrupted_save_leaves_the_old_settings_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        write(&path, &custom()).unwrap();
        let new = Settings {
            temperature: 1.5,
            ..Settings::default()
        };
        let bytes = serde_json::to_vec(&serde_json::json!({ "settings": new })).unwrap();
        let err = write_with(&path, &bytes, |f, b| {
            f.write_all(&b[..b.len() / 2])?;
            Err(io::Error::other("No space left on device"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("No space"));
        assert_eq!(read(&path), (custom(), None), "the old settings are intact");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
        // what a crash in the middle of a save leaves behind: a half-written temporary file
        std::fs::write(dir.path().join(".settings.json.tmp"), &bytes[..10]).unwrap();
        assert_eq!(read(&path), (custom(), None));
        write(&path, &new).unwrap();
        assert_eq!(read(&path), (new, None), "the next save replaces it");
    }

    /// A damaged file (cut short, not JSON, wrong values) starts the app on the defaults with
    /// a notice; it never stops it.
    #[test]
    fn a_corrupt_settings_file_gives_the_defaults_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        write(&path, &custom()).unwrap();
        let whole = std::fs::read(&path).unwrap();
        for damaged in [
            &whole[..whole.len() / 2],
            b"\0\0\0\0",
            br#"{"settings": {"topP": 7}}"#,
            br#"{"settings": "x"}"#,
            br#"[1, 2]"#,
        ] {
            std::fs::write(&path, damaged).unwrap();
            let (s, notice) = read(&path);
            assert_eq!(s, Settings::default());
            assert!(notice.is_some_and(|n| n.contains("defaults")));
        }
        std::fs::write(&path, b"").unwrap();
        assert_eq!(
            read(&path),
            (Settings::default(), None),
            "empty: nothing saved"
        );
    }
}
