//! A picture a person gave (attached in the app, `--image` on the command line, a data URL
//! through the local API): the file as it came, kept in the conversation's store, and its
//! pixels, decoded once and checked before anything is committed.

use std::sync::Arc;

use engine::vision::RgbImage;

use crate::error::{Error, Result};

/// The most bytes a picture file may have (the store's own limit).
pub const MAX_PICTURE_BYTES: usize = memory::MAX_IMAGE_BYTES;

/// A picture file and its pixels.
#[derive(Clone)]
pub struct Picture {
    bytes: Arc<[u8]>,
    media_type: &'static str,
    image: Arc<RgbImage>,
}

impl Picture {
    /// Check and decode a picture file: PNG, JPEG, WebP or GIF (its first frame), bounded in
    /// bytes and in pixels before decoding (`RgbImage::decode`). Refused in one line.
    pub fn decode(bytes: impl Into<Arc<[u8]>>) -> Result<Self> {
        let bytes: Arc<[u8]> = bytes.into();
        if bytes.len() > MAX_PICTURE_BYTES {
            return Err(Error::Picture(format!(
                "the picture is {} MB; Companion takes pictures of up to {} MB",
                bytes.len().div_ceil(1 << 20),
                MAX_PICTURE_BYTES >> 20
            )));
        }
        let media_type = RgbImage::media_type_of(&bytes).ok_or_else(|| {
            Error::Picture(
                "the file is not a picture Companion reads (PNG, JPEG, WebP or GIF)".into(),
            )
        })?;
        let image = RgbImage::decode(&bytes).map_err(|e| match e {
            engine::Error::InvalidArgument(message) => Error::Picture(message),
            other => Error::Picture(other.to_string()),
        })?;
        Ok(Picture {
            bytes,
            media_type,
            image: Arc::new(image),
        })
    }

    /// A picture file at `path`.
    pub fn read(path: &std::path::Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Picture(format!("cannot read the picture {}: {e}", path.display()))
        })?;
        Self::decode(bytes).map_err(|e| match e {
            Error::Picture(m) => Error::Picture(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// The file's bytes as they came.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    pub fn media_type(&self) -> &'static str {
        self.media_type
    }

    /// Its pixels, as the engine reads them.
    pub fn image(&self) -> &Arc<RgbImage> {
        &self.image
    }
}

/// Two pictures are the same when their files are.
impl PartialEq for Picture {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

/// Its type and size only: a picture's bytes are no one's debug output.
impl std::fmt::Debug for Picture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Picture({}, {} bytes, {} × {})",
            self.media_type,
            self.bytes.len(),
            self.image.width,
            self.image.height
        )
    }
}
