//! The file-driven source: the file holds one state word (`nominal`, `fair`, `serious`,
//! `critical` or `unknown`). Tests drive the pacing through it, and a user can simulate a hot
//! device with `echo serious > $COMPANION_THERMAL_FILE`. A missing or unreadable file, or a
//! word it does not know, reads as `unknown`. An empty file is a write caught between its
//! truncation and its text (`echo … >` and `std::fs::write` both truncate first), so it keeps
//! the last state read rather than flashing `unknown` between two real states.

use std::path::PathBuf;

use super::{ThermalSource, ThermalState};

#[derive(Debug, Clone)]
pub struct FileSource {
    path: PathBuf,
    /// The last problem logged, so a bad file is reported once, not every sample.
    warned: Option<String>,
    /// The last state the file named, reported again while the file is empty.
    last: ThermalState,
}

impl FileSource {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileSource {
            path: path.into(),
            warned: None,
            last: ThermalState::Unknown,
        }
    }

    fn warn_once(&mut self, problem: String) {
        if self.warned.as_deref() != Some(problem.as_str()) {
            tracing::warn!(path = %self.path.display(), "{problem}");
            self.warned = Some(problem);
        }
    }
}

impl ThermalSource for FileSource {
    fn read(&mut self) -> ThermalState {
        let state = match std::fs::read_to_string(&self.path) {
            Ok(text) if text.trim().is_empty() => self.last,
            Ok(text) => match text.parse::<ThermalState>() {
                Ok(state) => {
                    self.warned = None;
                    state
                }
                Err(e) => {
                    self.warn_once(e);
                    ThermalState::Unknown
                }
            },
            Err(e) => {
                self.warn_once(format!("cannot read the thermal file: {e}"));
                ThermalState::Unknown
            }
        };
        self.last = state;
        state
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_words_and_unknown_on_trouble() {
        let dir = std::env::temp_dir().join(format!("companion-thermal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let mut source = FileSource::new(&path);
        assert_eq!(source.read(), ThermalState::Unknown);
        std::fs::write(&path, "serious\n").unwrap();
        assert_eq!(source.read(), ThermalState::Serious);
        // a write between its truncation and its text keeps the state it replaces
        std::fs::write(&path, "").unwrap();
        assert_eq!(source.read(), ThermalState::Serious);
        std::fs::write(&path, "toasty").unwrap();
        assert_eq!(source.read(), ThermalState::Unknown);
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(
            source.read(),
            ThermalState::Unknown,
            "empty after unknown stays unknown"
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(source.read(), ThermalState::Unknown);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
