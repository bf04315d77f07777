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
/// the start of its last user turn (after any pictures that message already holds).
pub fn chat_parts(
    tokenizer: &GemmaTokenizer,
    messages: &[ChatMessage],
    images: &[Arc<RgbImage>],
) -> Result<Vec<PromptPart>> {
    let last_user = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .ok_or_else(|| Error::InvalidArgument("pictures need a user turn to go in".into()))?;
    let mut messages = messages.to_vec();
    messages[last_user].images.extend_from_slice(images);
    tokenizer.encode_chat_parts(&messages, true)
}

/// The token list a session holds once it holds `parts`: a picture's `per_image` positions
/// hold `placeholder`.
pub fn held_ids(parts: &[PromptPart], per_image: usize, placeholder: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    for part in parts {
        match part {
            PromptPart::Ids(part) => ids.extend_from_slice(part),
            PromptPart::Image(_) => ids.extend(std::iter::repeat_n(placeholder, per_image)),
        }
    }
    ids
}

/// Whether any piece is a picture.
pub fn has_images(parts: &[PromptPart]) -> bool {
    parts.iter().any(|p| matches!(p, PromptPart::Image(_)))
}

/// What [`Engine::prefill_parts_until`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartsPrefill {
    /// The token list the session holds for the parts (pictures hold the placeholder).
    pub held: Vec<u32>,
    /// Positions that were already held and kept.
    pub reused: usize,
    /// Positions run now (a picture's count once its rows are in).
    pub processed: usize,
    /// `stale` said to stop before every part was in.
    pub superseded: bool,
}

impl Engine {
    /// How many positions a picture takes with the projector loaded beside the model (0
    /// without one).
    pub fn tokens_per_image(&self) -> usize {
        self.vision()
            .map_or(0, |v| v.description().tokens_per_image())
    }

    /// Make `session` hold `parts`, reusing what it already holds (token ids and whole
    /// pictures alike, [`Session::reusable_prefix`]): text prefilled in chunks, each new
    /// picture encoded by the projector loaded beside the model and its rows prefilled as one
    /// step. Returns the token list the session now holds (the pictures' positions hold the
    /// placeholder) and how many of its positions were run; the session keeps the last
    /// position's hidden state, so a generation from that list starts at once. The prompt
    /// must end with text.
    pub fn prefill_parts(
        &self,
        session: &mut Session,
        parts: &[PromptPart],
    ) -> Result<(Vec<u32>, usize)> {
        if !matches!(parts.last(), Some(PromptPart::Ids(ids)) if !ids.is_empty()) {
            return Err(Error::InvalidArgument("a prompt must end with text".into()));
        }
        let done = self.prefill_parts_until(session, parts, session.chunk(), true, &|| false)?;
        Ok((done.held, done.processed))
    }

    /// [`Self::prefill_parts`] in chunks of `chunk` tokens, asking `stale` before each chunk
    /// and each picture whether to stop (a newer draft arrived); what was prefilled stays.
    /// With `last_hidden`, the last position is run even when it is already held, so that a
    /// generation can sample from it.
    pub fn prefill_parts_until(
        &self,
        session: &mut Session,
        parts: &[PromptPart],
        chunk: usize,
        last_hidden: bool,
        stale: &dyn Fn() -> bool,
    ) -> Result<PartsPrefill> {
        let pictures = has_images(parts);
        let vision = match self.vision() {
            Some(v) => Some(v),
            None if pictures => {
                return Err(Error::InvalidArgument(
                    "pictures need the model's vision projector (an mmproj file) loaded beside it"
                        .into(),
                ));
            }
            None => None,
        };
        let markers = if pictures {
            Some(ImageMarkers::of(self.tokenizer())?)
        } else {
            None
        };
        let per_image = self.tokens_per_image();
        let placeholder = markers.map_or(0, |m| m.placeholder);
        let held = held_ids(parts, per_image, placeholder);
        if held.len() >= session.context() {
            return Err(Error::PromptTooLong {
                tokens: held.len(),
                context: session.context(),
            });
        }
        let model = &self.model;
        if last_hidden && session.tokens() == held.as_slice() && session.has_last_hidden() {
            return Ok(PartsPrefill {
                reused: held.len(),
                held,
                processed: 0,
                superseded: false,
            });
        }
        let mut keep = session.reusable_prefix(parts, per_image);
        if last_hidden {
            keep = keep.min(held.len().saturating_sub(1));
        }
        // a cut inside a picture (or across a sliding ring) keeps less: what is held decides
        session.truncate(model, keep)?;
        let reused = session.len();
        let mut pos = 0;
        for part in parts {
            let len = match part {
                PromptPart::Ids(ids) => ids.len(),
                PromptPart::Image(_) => per_image,
            };
            let end = pos + len;
            if end > session.len() {
                match part {
                    PromptPart::Ids(ids) => {
                        let rest = &ids[session.len() - pos..];
                        let done = session.prefill_until(model, rest, chunk, stale)?;
                        if done < rest.len() {
                            return Ok(PartsPrefill {
                                reused,
                                processed: session.len() - reused,
                                held,
                                superseded: true,
                            });
                        }
                    }
                    PromptPart::Image(image) => {
                        if stale() {
                            return Ok(PartsPrefill {
                                reused,
                                processed: session.len() - reused,
                                held,
                                superseded: true,
                            });
                        }
                        if session.len() > pos {
                            session.truncate(model, pos)?;
                        }
                        let vision = vision.ok_or_else(|| {
                            Error::InvalidArgument("pictures need a vision projector".into())
                        })?;
                        let rows: ImageEmbeddings = vision.encode(model, image)?;
                        if rows.tokens != per_image {
                            return Err(Error::InvalidArgument(format!(
                                "the projector made {} rows of a picture, not {per_image}",
                                rows.tokens
                            )));
                        }
                        session.prefill_image(model, &rows, image.digest(), placeholder)?;
                    }
                }
            }
            pos = end;
        }
        Ok(PartsPrefill {
            reused,
            processed: held.len() - reused,
            held,
            superseded: false,
        })
    }
}
