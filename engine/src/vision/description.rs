//! What a vision projector file (an `mmproj` GGUF) describes, read from its metadata as data,
//! with the rules of llama.cpp b11434's loader (`tools/mtmd/clip.cpp`, `load_hparams`; key
//! names in `clip-impl.h`).

use std::path::Path;

use crate::error::{Error, Result};
use crate::gguf::ModelFile;

/// The projectors Companion runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projector {
    /// Gemma 3's: a SigLIP vision tower, `n_merge × n_merge` average pooling, the soft-token
    /// RMS norm and the input projection (`tools/mtmd/models/siglip.cpp`).
    Gemma3,
}

/// Sides and widths beyond these are refused before any tensor is read (Gemma 3's tower is
/// 896 px, 14 px patches, 1152 wide, 27 layers).
const MAX_IMAGE_SIZE: usize = 4096;
const MAX_WIDTH: usize = 1 << 16;
const MAX_LAYERS: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub struct VisionDescription {
    pub projector: Projector,
    /// The square the picture is fitted into, in pixels, and the patch side.
    pub image_size: usize,
    pub patch_size: usize,
    /// The vision tower's width, heads (of `head_dim`), FFN width and layers.
    pub n_embd: usize,
    pub n_head: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_layer: usize,
    /// Every layer norm's epsilon, and the projector's RMS norm's.
    pub eps: f32,
    pub image_mean: [f32; 3],
    pub image_std: [f32; 3],
    /// The pooling kernel: `n_merge × n_merge` patches become one image token.
    pub n_merge: usize,
    /// The width of the image tokens: the language model's embedding width.
    pub out_width: usize,
}

impl VisionDescription {
    /// The patches per side of the square.
    pub fn patches_per_side(&self) -> usize {
        self.image_size / self.patch_size
    }

    pub fn n_patches(&self) -> usize {
        self.patches_per_side() * self.patches_per_side()
    }

    /// The memory the encoder takes beyond its file's pages: the widest phase of a layer
    /// while it reads a picture (the MLP's: the residual, the normed input and its f16 copy,
    /// the FFN activations and their f16 copy, the output: `n × (10·e + 6·ff)` bytes for `n`
    /// patches), what the allocator still holds of the phase before (`n × (6·e + 4·ff)`), and
    /// the tables kept as f32 from load on (the position embeddings and the patch kernel:
    /// `4·n·e + 4·e·3·p²`). Calibrated on the peak RSS of `companion generate --image` with a
    /// projector of Gemma 3's real shape (896 px, 1152 wide, 4304 FFN) beside the default model:
    /// 1527 MB with a picture, 439 MB with the projector loaded and no picture, against an
    /// estimate of 404 MB for the model and the file's 847 MB; the formula gives 274 MB, the
    /// estimate 1525 MB in all. Saturating: a hostile header cannot wrap it.
    pub fn activation_bytes(&self) -> u64 {
        let (n, e, ff) = (
            self.n_patches() as u64,
            self.n_embd as u64,
            self.n_ff as u64,
        );
        let p2 = (self.patch_size as u64).saturating_mul(self.patch_size as u64);
        let working = n.saturating_mul(
            16u64
                .saturating_mul(e)
                .saturating_add(10u64.saturating_mul(ff)),
        );
        let tables = (4u64.saturating_mul(n).saturating_mul(e))
            .saturating_add(12u64.saturating_mul(e).saturating_mul(p2));
        working.saturating_add(tables)
    }

    /// The image tokens one picture becomes.
    pub fn tokens_per_image(&self) -> usize {
        let side = self.patches_per_side() / self.n_merge;
        side * side
    }

    /// Whether `path` is a vision projector rather than a language model.
    pub fn is_projector(file: &ModelFile) -> bool {
        matches!(
            file.meta().string("general.architecture"),
            Ok("clip") | Ok("mmproj")
        )
    }

    /// Read and check the description; the projector's output width is its
    /// `mm.input_projection` tensor's (clip.cpp reads it there, not from `projection_dim`).
    pub fn of(file: &ModelFile) -> Result<Self> {
        let path = file.path();
        let meta = file.meta();
        if !Self::is_projector(file) {
            return Err(invalid(
                path,
                "it is not a vision projector (`general.architecture` is not `clip`)",
            ));
        }
        if meta.opt_bool("clip.has_vision_encoder") != Some(true) {
            return Err(invalid(
                path,
                "it has no vision encoder (an audio projector?)",
            ));
        }
        let kind = match meta.string("clip.projector_type") {
            Ok(k) => k.to_string(),
            Err(_) => meta.string("clip.vision.projector_type")?.to_string(),
        };
        let projector = match kind.as_str() {
            "gemma3" => Projector::Gemma3,
            "gemma4v" | "gemma4uv" => {
                return Err(Error::UnsupportedModel {
                    path: path.to_path_buf(),
                    what: format!(
                        "Gemma 4's vision projector (`{kind}`) is not supported yet; Gemma 3's is"
                    ),
                });
            }
            other => {
                return Err(Error::UnsupportedModel {
                    path: path.to_path_buf(),
                    what: format!("the vision projector `{other}` (Companion reads Gemma 3's)"),
                });
            }
        };
        // clip.cpp: without `use_gelu` the FFN silently becomes GELU-quick; Gemma 3's converter
        // always writes it
        if meta.opt_bool("clip.use_gelu") != Some(true)
            || meta.opt_bool("clip.use_silu") == Some(true)
        {
            return Err(Error::UnsupportedModel {
                path: path.to_path_buf(),
                what: "a vision tower whose FFN is not the tanh GELU (`clip.use_gelu`)".into(),
            });
        }
        let n_embd = meta.usize("clip.vision.embedding_length")?;
        let n_head = meta.usize("clip.vision.attention.head_count")?;
        let head_dim = match meta.opt_usize("clip.vision.attention.head_dim")? {
            Some(d) => d,
            None if n_head > 0 => n_embd / n_head,
            None => 0,
        };
        let n_kv = meta
            .opt_usize("clip.vision.attention.head_count_kv")?
            .unwrap_or(n_head);
        let d = VisionDescription {
            projector,
            image_size: meta.usize("clip.vision.image_size")?,
            patch_size: meta.usize("clip.vision.patch_size")?,
            n_embd,
            n_head,
            head_dim,
            n_ff: meta.usize("clip.vision.feed_forward_length")?,
            n_layer: meta.usize("clip.vision.block_count")?,
            eps: meta.f32("clip.vision.attention.layer_norm_epsilon")?,
            image_mean: triple(file, "clip.vision.image_mean")?,
            image_std: triple(file, "clip.vision.image_std")?,
            n_merge: meta
                .opt_usize("clip.vision.projector.scale_factor")?
                .unwrap_or(4),
            out_width: file
                .tensor_dims("mm.input_projection.weight")
                .and_then(|dims| dims.last().copied())
                .ok_or_else(|| invalid(path, "tensor `mm.input_projection.weight` is missing"))?,
        };
        let sane = |v: usize, max: usize| v > 0 && v <= max;
        let checks = [
            (sane(d.image_size, MAX_IMAGE_SIZE), "image size"),
            (sane(d.patch_size, d.image_size.max(1)), "patch size"),
            (
                d.image_size.is_multiple_of(d.patch_size.max(1)),
                "image size (not whole patches)",
            ),
            (sane(d.n_embd, MAX_WIDTH), "embedding length"),
            (sane(d.n_head, d.n_embd.max(1)), "head count"),
            (
                n_kv == n_head,
                "KV head count (the tower's attention has all its heads)",
            ),
            (d.head_dim * d.n_head == d.n_embd, "head size"),
            (sane(d.n_ff, MAX_WIDTH), "feed-forward length"),
            (sane(d.n_layer, MAX_LAYERS), "block count"),
            (sane(d.out_width, MAX_WIDTH), "projection width"),
            (d.eps.is_finite() && d.eps >= 0.0, "layer norm epsilon"),
            (
                sane(d.n_merge, d.patches_per_side().max(1))
                    && d.patches_per_side().is_multiple_of(d.n_merge),
                "pooling factor (not whole pools of patches)",
            ),
            (
                d.image_std.iter().all(|s| s.is_finite() && *s != 0.0)
                    && d.image_mean.iter().all(|m| m.is_finite()),
                "image mean or std",
            ),
        ];
        if let Some((_, what)) = checks.iter().find(|(ok, _)| !ok) {
            return Err(invalid(path, &format!("its {what} is out of range")));
        }
        Ok(d)
    }
}

fn invalid(path: &Path, reason: &str) -> Error {
    Error::InvalidModel {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// A three-number array (clip.cpp refuses fewer than three).
fn triple(file: &ModelFile, key: &str) -> Result<[f32; 3]> {
    let meta = file.meta();
    let values = meta.array(key)?;
    let nums: Vec<f32> = values
        .iter()
        .filter_map(|v| crate::gguf::value_to_f64(v).map(|x| x as f32))
        .collect();
    match nums.as_slice() {
        [a, b, c, ..] if nums.len() == values.len() => Ok([*a, *b, *c]),
        _ => Err(invalid(
            file.path(),
            &format!("metadata key `{key}` is not three numbers"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real_shape() -> VisionDescription {
        VisionDescription {
            projector: Projector::Gemma3,
            image_size: 896,
            patch_size: 14,
            n_embd: 1152,
            n_head: 16,
            head_dim: 72,
            n_ff: 4304,
            n_layer: 27,
            eps: 1e-6,
            image_mean: [0.5; 3],
            image_std: [0.5; 3],
            n_merge: 4,
            out_width: 640,
        }
    }

    #[test]
    fn the_working_memory_of_gemma_3s_encoder_is_what_was_measured() {
        let d = real_shape();
        assert_eq!(d.tokens_per_image(), 256);
        // 241 MB measured beyond the file for the working set, 35 MB for the tables
        let mb = d.activation_bytes() as f64 / 1e6;
        assert!((270.0..290.0).contains(&mb), "{mb} MB");
        let hostile = VisionDescription {
            n_embd: usize::MAX / 2,
            ..real_shape()
        };
        assert_eq!(hostile.activation_bytes(), u64::MAX);
    }
}
