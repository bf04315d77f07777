//! Pictures attached to messages, kept content-addressed: one file per distinct picture in a
//! folder beside the database, named by the lowercase hex sha256 of its bytes (as git names
//! its objects), so a picture attached twice, or in two conversations, is kept once. A file is
//! written durably before any row names it (temporary name, sync, rename, sync of the folder:
//! `files.rs`, as KV snapshots are), so a committed message never names half a picture.
//!
//! The `images` table has a row per picture that some message links to (`message_images`, in
//! attachment order). Whatever deletes messages deletes, in the same transaction, the rows of
//! pictures no message links to any more, and removes their files after the commit: a file
//! outlives its row only until then (or, where removing it failed, for good: harmless).
//!
//! File names are built only from strings that are a sha256 in lowercase hex, so no id from an
//! export, a sync record or the IPC edge can name a path outside the folder. Reading a picture
//! checks its hash, so a damaged file is reported, never handed to the model.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use sha2::{Digest, Sha256};

use super::Store;
use super::files::{SnapshotFiles, write_durably};
use crate::error::{Error, Result};
use crate::types::{ConversationId, ImageRef, MessageId, now_ms};

/// The largest picture kept (a camera's full-size photo fits; the model sees far fewer pixels).
pub const MAX_IMAGE_BYTES: usize = 32 << 20;

/// The kinds of picture kept: those the engine's image preprocessing decodes.
pub const IMAGE_MIME_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// The folder of picture files and the file operations it is written with (the store's, so a
/// power-loss test's file system holds pictures as it holds snapshots).
#[derive(Debug, Clone)]
pub(crate) struct ImageFolder {
    dir: PathBuf,
    files: Arc<dyn SnapshotFiles>,
}

impl ImageFolder {
    pub(crate) fn new(dir: PathBuf, files: Arc<dyn SnapshotFiles>) -> Self {
        ImageFolder { dir, files }
    }

    fn path(&self, sha256: &str) -> Result<PathBuf> {
        if !is_sha256(sha256) {
            return Err(Error::InvalidArgument(format!(
                "`{sha256}` is not the sha256 of a picture"
            )));
        }
        Ok(self.dir.join(sha256))
    }

    /// Keep `bytes`, whose sha256 the caller computed as `sha256`, as that picture's file. A
    /// file already there that hashes right is left as it is; one that does not is replaced.
    pub(crate) fn write(&self, sha256: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(sha256)?;
        if self
            .files
            .read(&path)
            .is_ok_and(|existing| sha256_hex(&existing) == sha256)
        {
            return Ok(());
        }
        // a name of its own per write: two stores saving the same picture at once must not
        // write into one temporary file
        let tmp = format!(".{sha256}.{}.tmp", uuid::Uuid::new_v4().simple());
        write_durably(&*self.files, &self.dir, sha256, &tmp, bytes)
            .map_err(|e| Error::io("write the picture", &path, e))
    }

    /// The picture's bytes, checked against its name.
    pub(crate) fn read(&self, sha256: &str) -> Result<Vec<u8>> {
        let path = self.path(sha256)?;
        let bytes = match self.files.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::ImageMissing(sha256.to_string()));
            }
            Err(e) => return Err(Error::io("read the picture", &path, e)),
        };
        if sha256_hex(&bytes) != sha256 {
            return Err(Error::ImageCorrupt(sha256.to_string()));
        }
        Ok(bytes)
    }

    /// The size of the picture's file.
    fn size(&self, sha256: &str) -> Result<u64> {
        let path = self.path(sha256)?;
        match self.files.size(&path) {
            Ok(size) => Ok(size),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Error::ImageMissing(sha256.to_string()))
            }
            Err(e) => Err(Error::io("read the picture", &path, e)),
        }
    }
}

impl Store {
    /// Keep a picture (before the message it goes with is appended: see
    /// [`crate::NewMessage::with_images`]). Only PNG, JPEG, WebP and GIF, of at most
    /// [`MAX_IMAGE_BYTES`]. The file is written durably on return; it gets its row when a
    /// message links to it.
    pub fn save_image(&self, bytes: &[u8], mime: &str) -> Result<ImageRef> {
        check_image(bytes.len(), mime)?;
        let sha256 = sha256_hex(bytes);
        self.images.write(&sha256, bytes)?;
        Ok(ImageRef {
            sha256,
            mime: mime.to_string(),
        })
    }

    /// A picture's bytes, checked against its sha256: [`Error::ImageMissing`] when its file is
    /// gone, [`Error::ImageCorrupt`] when it no longer hashes right.
    pub fn image_bytes(&self, image: &ImageRef) -> Result<Vec<u8>> {
        self.images.read(&image.sha256)
    }

    /// The picture kept under `sha256`, if a message links to it (a file no row names, one
    /// whose message went, is not anyone's to read). A string that is not a sha256 in
    /// lowercase hex is refused, never looked up.
    pub fn image(&self, sha256: &str) -> Result<Option<ImageRef>> {
        if !is_sha256(sha256) {
            return Err(Error::InvalidArgument(format!(
                "`{}` is not the sha256 of a picture",
                sha256.chars().take(80).collect::<String>()
            )));
        }
        Ok(self
            .conn
            .prepare_cached("SELECT mime FROM images WHERE sha256 = ?1")?
            .query_row([sha256], |r| r.get::<_, String>(0))
            .optional()?
            .map(|mime| ImageRef {
                sha256: sha256.to_string(),
                mime,
            }))
    }

    /// Remove the files of pictures whose rows a committed transaction deleted. Best effort:
    /// a file that cannot be removed is only logged. A picture linked again since (another
    /// store appended it meanwhile) keeps its file.
    pub(crate) fn remove_image_files(&self, shas: &[String]) {
        for sha256 in shas {
            let kept = self
                .conn
                .query_row("SELECT 1 FROM images WHERE sha256 = ?1", [sha256], |_| {
                    Ok(())
                })
                .optional();
            if !matches!(kept, Ok(None)) {
                continue;
            }
            let Ok(path) = self.images.path(sha256) else {
                continue;
            };
            match self.images.files.remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "could not remove a picture no message uses")
                }
            }
        }
    }
}

/// Whether `s` can name a picture: 64 lowercase hex digits.
pub(crate) fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Refuse a picture Companion does not keep: the wrong kind, empty or too large.
pub(crate) fn check_image(len: usize, mime: &str) -> Result<()> {
    if !IMAGE_MIME_TYPES.contains(&mime) {
        return Err(Error::ImageType(mime.to_string()));
    }
    if len == 0 {
        return Err(Error::InvalidArgument("the picture is empty".into()));
    }
    if len > MAX_IMAGE_BYTES {
        return Err(Error::ImageTooLarge(len));
    }
    Ok(())
}

/// A picture's bytes as text (standard base64), for exports and sync records.
pub(crate) fn to_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A picture carried as text, back to bytes: refused, with a one-line reason, unless it is a
/// picture Companion keeps and its bytes hash to `sha256`.
pub(crate) fn from_base64(sha256: &str, mime: &str, data: &str) -> Result<Vec<u8>, String> {
    let short = sha256.get(..12).unwrap_or(sha256);
    if !is_sha256(sha256) {
        return Err(format!("`{short}` is not the sha256 of a picture"));
    }
    // measured before decoding, so a huge string is not decoded only to be refused
    if data.len() > MAX_IMAGE_BYTES.div_ceil(3) * 4 {
        return Err(format!("picture {short}… is larger than a picture can be"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("the data of picture {short}… is not base64: {e}"))?;
    check_image(bytes.len(), mime).map_err(|e| format!("picture {short}…: {e}"))?;
    if sha256_hex(&bytes) != sha256 {
        return Err(format!(
            "the data of picture {short}… does not match its sha256"
        ));
    }
    Ok(bytes)
}

/// Link `images` to `message` in order, with a row for each picture not kept yet; the files
/// must be there ([`Error::ImageMissing`] otherwise).
pub(crate) fn attach(
    tx: &Transaction<'_>,
    folder: &ImageFolder,
    message: MessageId,
    images: &[ImageRef],
) -> Result<()> {
    for (position, image) in images.iter().enumerate() {
        if !IMAGE_MIME_TYPES.contains(&image.mime.as_str()) {
            return Err(Error::ImageType(image.mime.clone()));
        }
        let size = folder.size(&image.sha256)?;
        tx.prepare_cached(
            "INSERT OR IGNORE INTO images (sha256, mime, byte_count, created_at)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![image.sha256, image.mime, size as i64, now_ms()])?;
        tx.prepare_cached(
            "INSERT INTO message_images (message_id, position, sha256) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![message.0, position as i64, image.sha256])?;
    }
    Ok(())
}

/// Delete the rows of pictures no message links to any more (after messages were deleted in
/// `tx`); returns their sha256s, whose files go once `tx` is committed.
pub(crate) fn take_unlinked(tx: &Transaction<'_>) -> Result<Vec<String>> {
    const UNLINKED: &str =
        "NOT EXISTS (SELECT 1 FROM message_images m WHERE m.sha256 = images.sha256)";
    let shas: Vec<String> = {
        let mut stmt = tx.prepare(&format!("SELECT sha256 FROM images WHERE {UNLINKED}"))?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if !shas.is_empty() {
        tx.execute(&format!("DELETE FROM images WHERE {UNLINKED}"), [])?;
    }
    Ok(shas)
}

fn image_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, ImageRef)> {
    Ok((
        r.get(0)?,
        ImageRef {
            sha256: r.get(1)?,
            mime: r.get(2)?,
        },
    ))
}

/// The pictures of every message of a conversation, by message row id, in order: one query
/// for the whole conversation.
pub(crate) fn of_conversation(
    conn: &Connection,
    conversation: &ConversationId,
) -> Result<HashMap<i64, Vec<ImageRef>>> {
    let mut stmt = conn.prepare_cached(
        "SELECT l.message_id, l.sha256, i.mime FROM message_images l
         JOIN images i ON i.sha256 = l.sha256
         JOIN messages m ON m.id = l.message_id
         WHERE m.conversation_id = ?1 ORDER BY l.message_id, l.position",
    )?;
    let mut out: HashMap<i64, Vec<ImageRef>> = HashMap::new();
    for row in stmt.query_map([conversation.as_str()], image_from_row)? {
        let (message, image) = row?;
        out.entry(message).or_default().push(image);
    }
    Ok(out)
}

/// The pictures of one message, in order.
pub(crate) fn of_message(conn: &Connection, message: MessageId) -> Result<Vec<ImageRef>> {
    let mut stmt = conn.prepare_cached(
        "SELECT l.message_id, l.sha256, i.mime FROM message_images l
         JOIN images i ON i.sha256 = l.sha256
         WHERE l.message_id = ?1 ORDER BY l.position",
    )?;
    let rows = stmt.query_map([message.0], image_from_row)?;
    Ok(rows
        .map(|r| r.map(|(_, image)| image))
        .collect::<rusqlite::Result<_>>()?)
}

/// The size of each picture kept, by sha256, for `shas` (the Markdown export shows it).
pub(crate) fn sizes(conn: &Connection, shas: &[&str]) -> Result<HashMap<String, i64>> {
    let mut stmt = conn.prepare_cached("SELECT byte_count FROM images WHERE sha256 = ?1")?;
    let mut out = HashMap::new();
    for sha in shas {
        if let Some(size) = stmt.query_row([sha], |r| r.get(0)).optional()? {
            out.insert(sha.to_string(), size);
        }
    }
    Ok(out)
}
