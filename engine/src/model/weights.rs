//! The weights a model description asks for, loaded by name and checked against the shape the
//! description implies (llama.cpp `load_arch_tensors` of `src/models/gemma*.cpp`): a block has
//! Q, K, V (K and V absent on shared-KV layers, V absent where V = K), the output projection,
//! the FFN, and the norms its generation uses; Gemma 4 adds per-layer embeddings and a scalar
//! output scale.

use candle_core::{DType, Device, Tensor};

use super::linear::Linear;
use crate::arch::{LayerArch, ModelArch};
use crate::backend::BackendKind;
use crate::error::{Error, Result};
use crate::gguf::{ModelFile, keys, keys::part};

/// An RMSNorm weight: a tensor for candle, a host copy for our kernels.
#[derive(Debug)]
pub(crate) struct Norm {
    pub tensor: Option<Tensor>,
    pub host: Vec<f32>,
}

impl Norm {
    pub fn len(&self) -> usize {
        self.host.len()
    }

    /// Tensor `name` of `len` values as f32, on the host and (for the candle backend) on the
    /// device; a value that is not finite is refused.
    pub(crate) fn load(
        file: &mut ModelFile,
        name: &str,
        len: usize,
        device: &Device,
        backend: BackendKind,
    ) -> Result<Norm> {
        let host = file
            .tensor(name, &[len], &Device::Cpu)?
            .dequantize(&Device::Cpu)?
            .to_dtype(DType::F32)?
            .to_vec1::<f32>()?;
        if host.iter().any(|v| !v.is_finite()) {
            return Err(Error::InvalidModel {
                path: file.path().to_path_buf(),
                reason: format!("tensor `{name}` holds a value that is not finite"),
            });
        }
        let tensor = match backend {
            BackendKind::Host => None,
            BackendKind::Candle => Some(Tensor::from_slice(&host, len, device)?),
        };
        Ok(Norm { tensor, host })
    }
}

/// The per-layer embedding inputs of Gemma 4's E-series (`per_layer_token_embd`,
/// `per_layer_model_proj`, `per_layer_proj_norm`).
#[derive(Debug)]
pub(crate) struct PleWeights {
    pub token_embd: Linear,
    pub model_proj: Linear,
    pub proj_norm: Norm,
}

/// Per block: `inp_gate`, `proj`, `post_norm`.
#[derive(Debug)]
pub(crate) struct LayerPle {
    pub inp_gate: Linear,
    pub proj: Linear,
    pub post_norm: Norm,
}

#[derive(Debug)]
pub(crate) struct LayerWeights {
    pub attn_norm: Norm,
    pub q: Linear,
    /// `None` on shared-KV layers.
    pub k: Option<Linear>,
    /// `None` on shared-KV layers and where V is the K projection.
    pub v: Option<Linear>,
    pub q_norm: Option<Norm>,
    pub k_norm: Option<Norm>,
    pub o: Linear,
    pub post_attn_norm: Option<Norm>,
    pub ffn_norm: Norm,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    pub post_ffn_norm: Option<Norm>,
    pub ple: Option<LayerPle>,
    pub output_scale: Option<f32>,
}

#[derive(Debug)]
pub(crate) struct Weights {
    pub embedding: Linear,
    /// `None` when the output is tied to the embedding.
    pub output: Option<Linear>,
    pub output_norm: Norm,
    pub layers: Vec<LayerWeights>,
    pub ple: Option<PleWeights>,
    /// Gemma 4's `rope_freqs` (divisors of the global layers' rope frequencies).
    pub rope_freqs: Option<Vec<f32>>,
}

impl Weights {
    /// The matrix that turns hidden states into logits.
    pub fn output(&self) -> &Linear {
        self.output.as_ref().unwrap_or(&self.embedding)
    }

    pub fn load(
        file: &mut ModelFile,
        arch: &ModelArch,
        device: &Device,
        backend: BackendKind,
    ) -> Result<Self> {
        let e = arch.n_embd;
        let mut load = Loader {
            file,
            device,
            backend,
        };
        // tied, the embedding is also the output projection; else only its rows are gathered
        let embedding = if arch.tied_output {
            load.matrix(keys::TOKEN_EMBD, arch.n_vocab, e)?
        } else {
            load.gathered(keys::TOKEN_EMBD, arch.n_vocab, e)?
        };
        let output = if arch.tied_output {
            None
        } else {
            Some(load.matrix(keys::OUTPUT, arch.n_vocab, e)?)
        };
        let output_norm = load.norm(keys::OUTPUT_NORM, e)?;
        let rope_freqs = if arch.ropes.iter().any(|r| r.freq_factors) {
            let width = arch
                .ropes
                .iter()
                .filter(|r| r.freq_factors)
                .map(|r| r.n_rot / 2)
                .max()
                .unwrap_or(0);
            let factors = load.norm(keys::ROPE_FREQS, width)?.host;
            if factors.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
                return Err(
                    load.invalid("`rope_freqs` holds a factor that is not a positive number")
                );
            }
            Some(factors)
        } else {
            None
        };
        let ple = match arch.per_layer_input {
            Some(p) => {
                let all = p * arch.n_layer();
                Some(PleWeights {
                    token_embd: load.gathered(keys::PER_LAYER_TOKEN_EMBD, arch.n_vocab, all)?,
                    model_proj: load.matrix(keys::PER_LAYER_MODEL_PROJ, all, e)?,
                    proj_norm: load.norm(keys::PER_LAYER_PROJ_NORM, p)?,
                })
            }
            None => None,
        };
        let mut layers = Vec::with_capacity(arch.n_layer());
        for (il, spec) in arch.layers.iter().enumerate() {
            layers.push(load.layer(il, spec, arch)?);
        }
        Ok(Weights {
            embedding,
            output,
            output_norm,
            layers,
            ple,
            rope_freqs,
        })
    }
}

struct Loader<'a> {
    file: &'a mut ModelFile,
    device: &'a Device,
    backend: BackendKind,
}

impl Loader<'_> {
    fn invalid(&self, reason: &str) -> Error {
        Error::InvalidModel {
            path: self.file.path().to_path_buf(),
            reason: reason.to_string(),
        }
    }

    /// A matrix the forward pass multiplies.
    fn matrix(&mut self, name: &str, n: usize, k: usize) -> Result<Linear> {
        Linear::load(self.file, name, (n, k), true, self.device, self.backend)
    }

    /// A table the forward pass only gathers rows of.
    fn gathered(&mut self, name: &str, n: usize, k: usize) -> Result<Linear> {
        Linear::load(self.file, name, (n, k), false, self.device, self.backend)
    }

    fn norm(&mut self, name: &str, len: usize) -> Result<Norm> {
        Norm::load(self.file, name, len, self.device, self.backend)
    }

    fn layer(&mut self, il: usize, spec: &LayerArch, arch: &ModelArch) -> Result<LayerWeights> {
        let e = arch.n_embd;
        let (q, kv, d, ff) = (spec.q_width(), spec.kv_width(), spec.head_dim, spec.n_ff);
        let name = |p: &str| keys::block(il, p);
        let stores = spec.stores_kv();
        let ple = match arch.per_layer_input {
            Some(p) => Some(LayerPle {
                inp_gate: self.matrix(&name(part::PER_LAYER_INP_GATE), p, e)?,
                proj: self.matrix(&name(part::PER_LAYER_PROJ), e, p)?,
                post_norm: self.norm(&name(part::PER_LAYER_POST_NORM), e)?,
            }),
            None => None,
        };
        let output_scale = if spec.output_scale {
            let s = self.norm(&name(part::LAYER_OUTPUT_SCALE), 1)?.host[0];
            Some(s)
        } else {
            None
        };
        Ok(LayerWeights {
            attn_norm: self.norm(&name(part::ATTN_NORM), e)?,
            q: self.matrix(&name(part::ATTN_Q), q, e)?,
            k: if stores {
                Some(self.matrix(&name(part::ATTN_K), kv, e)?)
            } else {
                None
            },
            v: if stores && !spec.v_from_k {
                Some(self.matrix(&name(part::ATTN_V), kv, e)?)
            } else {
                None
            },
            q_norm: if spec.qk_norm {
                Some(self.norm(&name(part::ATTN_Q_NORM), d)?)
            } else {
                None
            },
            k_norm: if spec.qk_norm && stores {
                Some(self.norm(&name(part::ATTN_K_NORM), d)?)
            } else {
                None
            },
            o: self.matrix(&name(part::ATTN_OUTPUT), e, q)?,
            post_attn_norm: if spec.post_norms {
                Some(self.norm(&name(part::POST_ATTENTION_NORM), e)?)
            } else {
                None
            },
            ffn_norm: self.norm(&name(part::FFN_NORM), e)?,
            gate: self.matrix(&name(part::FFN_GATE), ff, e)?,
            up: self.matrix(&name(part::FFN_UP), ff, e)?,
            down: self.matrix(&name(part::FFN_DOWN), e, ff)?,
            post_ffn_norm: if spec.post_norms {
                Some(self.norm(&name(part::POST_FFW_NORM), e)?)
            } else {
                None
            },
            ple,
            output_scale,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::keys;

    fn load_host(fixture: &str) -> ModelFile {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemma-family")
            .join(fixture);
        let mut file = ModelFile::open(&path).unwrap();
        let arch = crate::arch::ModelArch::of(&file).unwrap();
        Weights::load(&mut file, &arch, &Device::Cpu, BackendKind::Host).unwrap();
        file
    }

    /// What goes onto huge pages (`gguf::resident`): every matrix the forward pass multiplies,
    /// never a table it only gathers rows of (those stay mapped, paged in row by row).
    #[test]
    fn only_multiplied_matrices_are_marked_for_huge_pages() {
        let file = load_host("gemma4-ple-shared.q4_k_m.gguf");
        let names: Vec<&str> = file.multiplied_tensor_names().collect();
        let q0 = keys::block(0, part::ATTN_Q);
        assert!(names.contains(&q0.as_str()), "{names:?}");
        assert!(names.contains(&keys::PER_LAYER_MODEL_PROJ), "{names:?}");
        assert!(!names.contains(&keys::PER_LAYER_TOKEN_EMBD), "{names:?}");
        // tied output: the embedding is also the output projection, so it is multiplied
        assert!(crate::arch::ModelArch::of(&file).unwrap().tied_output);
        assert!(names.contains(&keys::TOKEN_EMBD), "{names:?}");
    }
}
