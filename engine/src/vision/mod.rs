//! Pictures read by a vision encoder: a projector file (`mmproj` GGUF) beside its language
//! model turns a picture into rows the model reads as it reads token embeddings.
//!
//! - [`VisionDescription`] (`description`): what the projector file describes, as data;
//! - [`RgbImage`] (`image`): decoding and llama.cpp's preprocessing (fit, pad, normalize);
//! - `encoder`: Gemma 3's SigLIP tower and projector over the backend interface.
//!
//! The rows go into a session at its current position ([`crate::Session::prefill_image`]), as
//! llama.cpp's `tools/mtmd` puts them into a `llama_context`.

mod description;
mod encoder;
mod image;
mod prompt;

use std::path::Path;

pub use description::{Projector, VisionDescription};
pub use image::{MAX_SIDE, RgbImage};
pub use prompt::{
    ImageMarkers, MEDIA_MARKER, PartsPrefill, PromptPart, chat_parts, has_images, held_ids,
    raw_parts,
};

use crate::error::{Error, Result};
use crate::gguf::ModelFile;
use crate::model::Model;

/// A picture encoded for a language model: `tokens` rows of `width` values.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageEmbeddings {
    pub rows: Vec<f32>,
    pub tokens: usize,
    pub width: usize,
}

/// A loaded vision projector, for the language model it was loaded beside.
#[derive(Debug)]
pub struct VisionEncoder {
    description: VisionDescription,
    weights: encoder::VisionWeights,
}

impl VisionEncoder {
    /// Load the projector at `path` for `model`, on its device and backend; refused in one
    /// line when its output width is not the model's embedding width.
    pub fn load(path: &Path, model: &Model) -> Result<Self> {
        Self::load_file(&mut ModelFile::open(path)?, model)
    }

    /// [`Self::load`] from an opened file.
    pub fn load_file(file: &mut ModelFile, model: &Model) -> Result<Self> {
        let path = file.path().to_path_buf();
        let description = VisionDescription::of(file)?;
        let n_embd = model.arch().n_embd;
        if description.out_width != n_embd {
            return Err(Error::InvalidModel {
                path,
                reason: format!(
                    "this projector makes rows of {} values and the model reads rows of {n_embd}: it belongs to another model",
                    description.out_width
                ),
            });
        }
        let weights =
            encoder::VisionWeights::load(file, &description, model.device(), model.backend())?;
        Ok(VisionEncoder {
            description,
            weights,
        })
    }

    pub fn description(&self) -> &VisionDescription {
        &self.description
    }

    /// The rows `image` becomes (fitted into the encoder's square as llama.cpp does).
    pub fn encode(&self, model: &Model, image: &RgbImage) -> Result<ImageEmbeddings> {
        let d = &self.description;
        let planes = image
            .letterboxed(d.image_size as u32)
            .normalized_planes(d.image_mean, d.image_std);
        let rows = model.on_backend(
            crate::cpu::RowSums::Batched,
            encoder::Encode {
                weights: &self.weights,
                description: d,
                planes: &planes,
            },
        )?;
        Ok(ImageEmbeddings {
            tokens: rows.len() / d.out_width,
            width: d.out_width,
            rows,
        })
    }
}
