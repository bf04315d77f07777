//! The API token: 32 random bytes from the OS, hex, kept in a file only the user can read
//! (`api-token` beside the database), made on first use and the same afterwards so that a
//! client configured once keeps working. `COMPANION_API_TOKEN` replaces it for scripts and
//! tests.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the token came from, for the line `companion serve` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Environment,
    File(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot {action} the API token file {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the API token file {0} is empty or not a token; delete it and a new one is made")]
    Malformed(PathBuf),
    #[error("COMPANION_API_TOKEN must be at least 16 characters without spaces")]
    WeakEnvironmentToken,
    #[error("the system's random generator failed: {0}")]
    Random(String),
}

/// The token file beside `database`.
pub fn token_path(database: &Path) -> PathBuf {
    database
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("api-token")
}

fn acceptable(token: &str) -> bool {
    token.len() >= 16 && token.bytes().all(|b| b.is_ascii_graphic())
}

/// `from_env` (`COMPANION_API_TOKEN`) when set, else the token in `file`, made there if
/// missing.
pub fn load_or_create(
    file: &Path,
    from_env: Option<&str>,
) -> Result<(String, TokenSource), TokenError> {
    if let Some(token) = from_env {
        let token = token.trim().to_string();
        if !acceptable(&token) {
            return Err(TokenError::WeakEnvironmentToken);
        }
        return Ok((token, TokenSource::Environment));
    }
    let io = |action| {
        move |source| TokenError::Io {
            action,
            path: file.to_path_buf(),
            source,
        }
    };
    match std::fs::read_to_string(file) {
        Ok(text) => {
            let token = text.trim().to_string();
            if !acceptable(&token) {
                return Err(TokenError::Malformed(file.to_path_buf()));
            }
            return Ok((token, TokenSource::File(file.to_path_buf())));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("read")(e)),
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(io("create the folder of"))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(file).map_err(io("create"))?;
    f.write_all(format!("{token}\n").as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(io("write"))?;
    Ok((token, TokenSource::File(file.to_path_buf())))
}

/// Compare without stopping at the first difference, so response times do not reveal how
/// much of a guess was right.
pub fn same_token(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub").join("api-token");
        let (first, source) = load_or_create(&file, None).unwrap();
        assert_eq!(first.len(), 64);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(source, TokenSource::File(file.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, _) = load_or_create(&file, None).unwrap();
        assert_eq!(first, again);
        std::fs::write(&file, "\n").unwrap();
        assert!(matches!(
            load_or_create(&file, None),
            Err(TokenError::Malformed(_))
        ));
        // the environment's token wins, and a weak one is refused
        let long = "t".repeat(20);
        let (env, source) = load_or_create(&file, Some(&long)).unwrap();
        assert_eq!(
            (env.as_str(), source),
            (long.as_str(), TokenSource::Environment)
        );
        assert!(matches!(
            load_or_create(&file, Some("short")),
            Err(TokenError::WeakEnvironmentToken)
        ));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abcdef", b"abcdef"));
        assert!(!same_token(b"abcdeg", b"abcdef"));
        assert!(!same_token(b"abc", b"abcdef"));
        assert!(!same_token(b"", b"abcdef"));
    }
}
