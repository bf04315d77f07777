//! Pictures in the chat: what the webview attaches to a message (data URLs read from a file the
//! user picked, pasted or dropped; checked and decoded here by `chat::Picture` before anything
//! is committed), a picture of the conversation read back for its thumbnail (by sha256, only
//! one the store keeps for a message: never a path), and a picture file dropped on the window
//! read for the composer (only a path the user dropped, as `summarize_dropped` takes).

use std::path::PathBuf;

use base64::Engine as _;
use chat::Picture;
use tauri::State;

use crate::error::{AppError, Result};
use crate::state::AppState;

/// The most pictures one message may carry (each is up to 32 MB, and a few hundred tokens of
/// the context once the model reads it).
pub const MAX_PICTURES: usize = 8;

/// The most base64 text one picture may take: its file's limit, × 4/3, rounded up.
const MAX_BASE64_CHARS: usize = chat::picture::MAX_PICTURE_BYTES.div_ceil(3) * 4;

fn bad_picture(message: impl Into<String>) -> AppError {
    AppError::new("bad_picture", crate::error::sentence(&message.into()))
}

/// One attached picture as the webview sends it: a `data:image/…;base64,…` URL (what
/// `FileReader.readAsDataURL` gives) or the bare base64 text. The type the URL names is not
/// trusted: the file's own first bytes say what it is.
pub fn decode_picture(text: &str) -> Result<Picture> {
    let data = match text.strip_prefix("data:") {
        Some(rest) => {
            let (header, data) = rest
                .split_once(',')
                .ok_or_else(|| bad_picture("the picture is a data URL without its data"))?;
            if !header.ends_with(";base64") {
                return Err(bad_picture(
                    "the picture must come as base64 (a `data:image/png;base64,…` URL)",
                ));
            }
            data
        }
        None => text,
    };
    if data.len() > MAX_BASE64_CHARS {
        return Err(bad_picture(format!(
            "the picture is larger than the {} MB Companion takes",
            chat::picture::MAX_PICTURE_BYTES >> 20
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| bad_picture(format!("the picture is not base64 ({e})")))?;
    Ok(Picture::decode(bytes)?)
}

/// Every attached picture, checked and decoded; the first that cannot be read refuses them
/// all, naming which it was.
pub fn decode_pictures(pictures: &[String]) -> Result<Vec<Picture>> {
    if pictures.len() > MAX_PICTURES {
        return Err(bad_picture(format!(
            "a message can carry up to {MAX_PICTURES} pictures; this one has {}",
            pictures.len()
        )));
    }
    pictures
        .iter()
        .enumerate()
        .map(|(i, text)| {
            decode_picture(text).map_err(|e| {
                if pictures.len() == 1 {
                    return e;
                }
                let message = e.message.trim_end_matches('.');
                let message = format!("picture {} of {}: {message}", i + 1, pictures.len());
                AppError::new(&e.code, crate::error::sentence(&message))
            })
        })
        .collect()
}

/// `data:<type>;base64,<bytes>`, for an `<img>` (the page's content policy allows `data:`).
pub fn data_url(media_type: &str, bytes: &[u8]) -> String {
    format!(
        "data:{media_type};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// A picture of the conversations, by the sha256 a message lists it with, as a data URL. Only
/// a picture that some message keeps is read; a string that is not a sha256 is refused.
#[tauri::command]
pub async fn picture(state: State<'_, AppState>, sha256: String) -> Result<String> {
    state.with_store(|store| {
        let image = store.image(&sha256)?.ok_or_else(|| {
            AppError::new(
                "picture_not_found",
                "That picture is no longer in your conversations.",
            )
        })?;
        let bytes = store.image_bytes(&image)?;
        Ok(data_url(&image.mime, &bytes))
    })
}

/// A picture file the user dropped on the window, checked, as a data URL for the composer
/// (then sent with the message like any attached picture). Only a dropped path is read.
#[tauri::command]
pub async fn dropped_picture(state: State<'_, AppState>, path: String) -> Result<String> {
    let path = PathBuf::from(path);
    if !state.is_granted(&path) {
        return Err(AppError::new(
            "not_granted",
            "Companion only reads pictures you drop on its window, paste or attach yourself; drop the picture again or use the attach button.",
        ));
    }
    tauri::async_runtime::spawn_blocking(move || {
        let picture = Picture::read(&path)?;
        Ok(data_url(picture.media_type(), picture.bytes()))
    })
    .await
    .map_err(|e| bad_picture(format!("the picture could not be read ({e})")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/gemma3-vision")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn a_data_url_or_bare_base64_decodes_and_anything_else_is_refused_in_a_sentence() {
        let png = fixture("small.png");
        let url = data_url("image/png", &png);
        assert!(url.starts_with("data:image/png;base64,iVBOR"), "{url:.40}");
        let picture = decode_picture(&url).unwrap();
        assert_eq!(picture.bytes(), &png[..]);
        assert_eq!(picture.media_type(), "image/png");
        // the type a URL names is not trusted; bare base64 is the same picture
        let mislabelled = url.replacen("image/png", "image/gif", 1);
        assert_eq!(
            decode_picture(&mislabelled).unwrap().media_type(),
            "image/png"
        );
        let bare = url.split_once(',').unwrap().1;
        assert_eq!(decode_picture(bare).unwrap(), picture);

        for (text, says) in [
            ("data:image/png,abc", "base64"),
            ("data:image/png;base64", "without its data"),
            ("not base64 at all!", "not base64"),
            ("aGVsbG8gd29ybGQ=", "not a picture"),
        ] {
            let e = decode_picture(text).unwrap_err();
            assert_eq!(e.code, "bad_picture", "{text}");
            assert!(e.message.contains(says), "{text}: {}", e.message);
            assert!(e.message.ends_with('.') && !e.message.contains('\n'));
        }
    }

    #[test]
    fn the_picture_that_cannot_be_read_is_named() {
        let good = data_url("image/png", &fixture("small.png"));
        let e = decode_pictures(&[good.clone(), "aGVsbG8=".into()]).unwrap_err();
        assert_eq!(e.code, "bad_picture");
        assert!(e.message.starts_with("Picture 2 of 2: "), "{}", e.message);
        let many = vec![good; MAX_PICTURES + 1];
        let e = decode_pictures(&many).unwrap_err();
        assert!(e.message.contains("up to 8 pictures"), "{}", e.message);
        assert_eq!(decode_pictures(&many[..2]).unwrap().len(), 2);
    }
}
