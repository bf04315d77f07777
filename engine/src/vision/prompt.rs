//! Prompts that hold pictures: the pieces in order (token ids, pictures), where Gemma's format
//! puts a picture, and a session made to hold them.
//!
//! As llama.cpp's `tools/mtmd` lays a Gemma 3 picture into a prompt (`mtmd.cpp`,
//! `mtmd_tokenize`): `<start_of_image>` ends the text before it, the picture's rows follow (one
//! position each), `<end_of_image>` starts the text after it; no newlines are added. In a raw
//! prompt llama.cpp's marker `<__media__>` says where each picture goes; in a conversation the
//! pictures open the last user turn, before its text (the user's text is never searched for
//! markers: text is data).

use std::sync::Arc;

use super::{ImageEmbeddings, RgbImage};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::tokenizer::{ChatMessage, GemmaTokenizer, Role};

/// llama.cpp's marker for a picture's place in a raw prompt (`mtmd_default_marker`).
pub const MEDIA_MARKER: &str = "<__media__>";

/// One piece of a prompt.
#[derive(Debug, Clone)]
pub enum PromptPart {
    Ids(Vec<u32>),
    Image(Arc<RgbImage>),
}

/// The tokens around a picture, and the id its positions hold in a session's token list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageMarkers {
    pub start: u32,
    pub end: u32,
    /// `<image_soft_token>` where the vocabulary has it, else the padding token: never run
    /// as text (`Session::prefill_image`).
    pub placeholder: u32,
}

impl ImageMarkers {
    /// Gemma 3's `<start_of_image>` and `<end_of_image>`.
    pub fn of(tokenizer: &GemmaTokenizer) -> Result<Self> {
        let vocab = tokenizer.vocab();
        let id = |name: &str| {
            vocab.id_of(name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "this model's vocabulary has no `{name}` token: it does not read pictures"
                ))
            })
        };
        Ok(ImageMarkers {
            start: id("<start_of_image>")?,
            end: id("<end_of_image>")?,
            placeholder: vocab.id_of("<image_soft_token>").unwrap_or(0),
        })
    }
}

/// A raw prompt (special-token text recognized, `<bos>` first) with `images` where its
/// markers are, in order; without a marker the pictures come first, right after `<bos>`.
pub fn raw_parts(
    tokenizer: &GemmaTokenizer,
    text: &str,
    images: &[Arc<RgbImage>],
) -> Result<Vec<PromptPart>> {
    let markers = ImageMarkers::of(tokenizer)?;
    let pieces: Vec<&str> = if text.contains(MEDIA_MARKER) {
        text.split(MEDIA_MARKER).collect()
    } else {
        std::iter::once("")
            .chain(std::iter::repeat_n("", images.len().saturating_sub(1)))
            .chain(std::iter::once(text))
            .collect()
    };
    if pieces.len() != images.len() + 1 {
        return Err(Error::InvalidArgument(format!(
            "the prompt has {} picture markers ({MEDIA_MARKER}) for {} pictures",
            pieces.len() - 1,
            images.len()
        )));
    }
    let mut parts = Vec::new();
    let mut ids = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        ids.extend(tokenizer.encode_special(piece, i == 0)?);
        if let Some(image) = images.get(i) {
            ids.push(markers.start);
            parts.push(PromptPart::Ids(std::mem::take(&mut ids)));
            parts.push(PromptPart::Image(image.clone()));
            ids.push(markers.end);
        }
    }
    parts.push(PromptPart::Ids(ids));
    Ok(parts)
}

/// A conversation in Gemma's chat format, ending with an open model turn, with `images` at
/// the start of its last user turn.
pub fn chat_parts(
    tokenizer: &GemmaTokenizer,
    messages: &[ChatMessage],
    images: &[Arc<RgbImage>],
) -> Result<Vec<PromptPart>> {
    let markers = ImageMarkers::of(tokenizer)?;
    let last_user = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .ok_or_else(|| Error::InvalidArgument("pictures need a user turn to go in".into()))?;
    let all = tokenizer.encode_chat(messages, true)?;
    // the ids up to the open last user turn, then its text and what follows
    let before = tokenizer.encode_open_user_turn(&messages[..last_user], "")?;
    if !all.starts_with(&before) {
        return Err(Error::InvalidArgument(
            "the chat format's user turn does not open as the conversation renders it".into(),
        ));
    }
    let mut parts = Vec::new();
    let mut ids = before.clone();
    for image in images {
        ids.push(markers.start);
        parts.push(PromptPart::Ids(std::mem::take(&mut ids)));
        parts.push(PromptPart::Image(image.clone()));
        ids.push(markers.end);
    }
    ids.extend_from_slice(&all[before.len()..]);
    parts.push(PromptPart::Ids(ids));
    Ok(parts)
}

impl Engine {
    /// Make `session` hold `parts` (the text before the first picture reused where the
    /// session already holds it): text prefilled in chunks, each picture encoded by the
    /// projector loaded beside the model and its rows prefilled as one step. Returns the
    /// token list the session now holds (the pictures' positions hold the placeholder) and
    /// how many of its positions were run; the session keeps the last position's hidden
    /// state, so a generation from that list starts at once. The prompt must end with text.
    pub fn prefill_parts(
        &self,
        session: &mut Session,
        parts: &[PromptPart],
    ) -> Result<(Vec<u32>, usize)> {
        let vision = self.vision().ok_or_else(|| {
            Error::InvalidArgument(
                "pictures need the model's vision projector (an mmproj file) loaded beside it"
                    .into(),
            )
        })?;
        let markers = ImageMarkers::of(self.tokenizer())?;
        if !matches!(parts.last(), Some(PromptPart::Ids(ids)) if !ids.is_empty()) {
            return Err(Error::InvalidArgument("a prompt must end with text".into()));
        }
        let per_image = vision.description().tokens_per_image();
        let total: usize = parts
            .iter()
            .map(|p| match p {
                PromptPart::Ids(ids) => ids.len(),
                PromptPart::Image(_) => per_image,
            })
            .sum();
        if total >= session.context() {
            return Err(Error::PromptTooLong {
                tokens: total,
                context: session.context(),
            });
        }
        let model = &self.model;
        // the text before the first picture: as any prompt, reusing the cached prefix
        let first_image = session
            .image_spans()
            .first()
            .map_or(usize::MAX, |s| s.start);
        let mut reused = 0;
        let mut held = match parts.first() {
            Some(PromptPart::Ids(ids)) => {
                reused = crate::session::common_prefix(session.tokens(), ids)
                    .min(first_image)
                    .min(ids.len().saturating_sub(1));
                session.sync_to(model, ids)?;
                ids.clone()
            }
            _ => {
                session.clear();
                Vec::new()
            }
        };
        for part in parts.iter().skip(usize::from(!held.is_empty())) {
            match part {
                PromptPart::Ids(ids) => {
                    for chunk in ids.chunks(session.chunk().max(1)) {
                        session.prefill(model, chunk)?;
                    }
                    held.extend_from_slice(ids);
                }
                PromptPart::Image(image) => {
                    let rows: ImageEmbeddings = vision.encode(model, image)?;
                    session.prefill_image(model, &rows, markers.placeholder)?;
                    held.extend(std::iter::repeat_n(markers.placeholder, rows.tokens));
                }
            }
        }
        let processed = held.len() - reused;
        Ok((held, processed))
    }
}
