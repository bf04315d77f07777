//! The one Gemma forward pass, for every generation the description covers and every
//! backend. It is llama.cpp b11434's graph (`src/models/gemma4.cpp`, of which gemma, gemma2
//! and gemma3 are the special cases the description switches off):
//!
//! ```text
//! x = embed(tokens) · √n_embd                    [+ per-layer inputs (Gemma 4 E-series)]
//! per layer:
//!   h = rmsnorm(x) · attn_norm
//!   q = h·Wq [rmsnorm · q_norm] → rope                  × q_scale (inside attention)
//!   k = h·Wk [rmsnorm · k_norm] → rope;  v = h·Wv or the raw k [rmsnorm]   (layers that store)
//!   a = attention(q, cache of this or the shared layer; window, soft-cap) · Wo [rmsnorm · post_attention_norm]
//!   x = x + a
//!   f = down(gelu(rmsnorm(x)·ffn_norm · Wgate) ⊙ (… · Wup)) [rmsnorm · post_ffw_norm]
//!   x = x + f
//!   [x = x + rmsnorm(proj(gelu(x·Winp_gate) ⊙ ple[layer])) · post_norm]   (per-layer inputs)
//!   [x = x · layer_output_scale]
//! out = rmsnorm(x) · output_norm      (logits: out · Wout or the tied embedding, soft-capped)
//! ```

use super::{Model, Output};
use crate::arch::KvSource;
use crate::backend::{AttentionSpec, Backend};
use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::model::Hidden;
use crate::model::weights::PleWeights;

/// Which positions a run of the blocks covers and how its attention sees the cache.
#[derive(Debug, Clone, Copy)]
pub(super) struct Blocks {
    /// The first position and how many.
    pub start: usize,
    pub seq: usize,
    pub output: Output,
    /// Whether the cache holds the positions run (the model's own pass: their keys are
    /// written, or were by the layer it shares) or only those before them (an assistant's
    /// query over its target's cache, `model::assistant`).
    pub own_position: bool,
    /// Each row sees only the positions up to its own (`false`: an image's rows also see one
    /// another's, [`StepInput::Image`]).
    pub causal: bool,
}

/// What one step reads.
#[derive(Debug, Clone, Copy)]
pub(super) enum StepInput<'a> {
    Tokens(&'a [u32]),
    /// An image's rows `[rows, n_embd]`, a vision projector's output, used as they are
    /// (llama.cpp scales token embeddings by √n_embd and image rows not at all, `llama-graph.cpp`
    /// `build_inp_embd`), in one step whose rows see one another (mtmd decodes an image as one
    /// non-causal batch, `mtmd_decode_use_non_causal`). The per-layer inputs of a Gemma 4
    /// E-series model read the padding token's (id 0) rows for them, as `gemma4.cpp` does.
    Image(&'a [f32]),
}

impl Model {
    /// `tokens` in steps of at most `cache.chunk()`; the hidden states `output` asks for.
    pub(super) fn forward_chunks<B: Backend>(
        &self,
        b: &B,
        tokens: &[u32],
        cache: &mut KvCache,
        output: Output,
    ) -> Result<Hidden> {
        // a prompt pass faults in fresh buffers: the huge-page move waits (`gguf::resident`)
        let _moves_paused = (tokens.len() > 1).then(crate::gguf::pause_moves);
        let mut outs = Vec::new();
        for chunk in tokens.chunks(cache.chunk()) {
            let h = self.step(b, StepInput::Tokens(chunk), cache, output)?;
            match output {
                Output::All | Output::AllAsDecode => outs.push(h),
                Output::Last => {
                    for old in outs.drain(..) {
                        b.release(old);
                    }
                    outs.push(h);
                }
            }
        }
        let rows = b.concat_rows(outs)?;
        b.hidden_of(rows, self.arch.n_embd)
    }

    /// One step of `input` at positions `cache.len()..`: the final hidden states (after the
    /// output norm) of the positions `output` asks for, `[rows, n_embd]`.
    pub(super) fn step<B: Backend>(
        &self,
        b: &B,
        input: StepInput<'_>,
        cache: &mut KvCache,
        output: Output,
    ) -> Result<B::Act> {
        let a = &self.arch;
        let w = &self.weights;
        let (e, eps) = (a.n_embd, a.rms_eps);
        let start = cache.len();
        let padding;
        let (x, tokens, causal) = match input {
            StepInput::Tokens(t) => (b.embed(&w.embedding, t, a.embed_scale)?, t, true),
            StepInput::Image(rows) => {
                padding = vec![0u32; rows.len() / e.max(1)];
                (b.input(rows.to_vec(), e)?, padding.as_slice(), false)
            }
        };
        let seq = tokens.len();
        let ple = match &w.ple {
            Some(p) => Some(self.per_layer_inputs(b, p, &x, tokens)?),
            None => None,
        };

        cache.begin_step(start, seq);
        let blocks = Blocks {
            start,
            seq,
            output,
            own_position: true,
            causal,
        };
        let x = self.blocks(b, x, ple.as_deref(), cache, blocks);
        if let Some(ple) = ple {
            for p in ple {
                b.release(p);
            }
        }
        let x = x?;
        cache.advance(start + seq);
        let rows = match output {
            Output::All | Output::AllAsDecode => x,
            Output::Last => b.last_row(x, e)?,
        };
        let out = b.rms_norm(&rows, &w.output_norm, eps)?;
        b.release(rows);
        Ok(out)
    }

    /// The blocks over the input activations `x` `[seq, n_embd]` of positions `start..`: each
    /// layer's attention reads (and, where the layer stores K/V, writes) `cache`. Returns the
    /// last block's output, before the output norm (of the last row only for [`Output::Last`]
    /// where the generation drops the others early).
    pub(super) fn blocks<B: Backend>(
        &self,
        b: &B,
        mut x: B::Act,
        ple: Option<&[B::Act]>,
        cache: &mut KvCache,
        run: Blocks,
    ) -> Result<B::Act> {
        let a = &self.arch;
        let w = &self.weights;
        let (e, eps) = (a.n_embd, a.rms_eps);
        let Blocks {
            start,
            seq,
            output,
            own_position,
            causal,
        } = run;
        for (il, (spec, lw)) in a.layers.iter().zip(&w.layers).enumerate() {
            let _span = tracing::trace_span!("block", il).entered();
            let rope = self.rope(spec.rope);
            let h = b.rms_norm(&x, &lw.attn_norm, eps)?;
            let (mut q, kv) = match (spec.kv, &lw.k) {
                (KvSource::Own, Some(k)) => {
                    let mats: Vec<_> = [Some(&lw.q), Some(k), lw.v.as_ref()]
                        .into_iter()
                        .flatten()
                        .collect();
                    let mut out = b.matmul_many(&mats, &h)?.into_iter();
                    let (Some(q), Some(k)) = (out.next(), out.next()) else {
                        return Err(Error::InvalidArgument(
                            "attention projections missing".into(),
                        ));
                    };
                    (q, Some((k, out.next())))
                }
                _ => (b.matmul(&lw.q, &h)?, None),
            };
            b.release(h);
            if let Some(n) = &lw.q_norm {
                b.rms_norm_in_place(&mut q, Some(n), spec.head_dim, eps)?;
            }
            b.rope(&mut q, rope, spec.n_head, start)?;
            let kv = match kv {
                Some((mut k, v)) => {
                    // V = the raw K projection where the layer has no `attn_v` (Gemma 4)
                    let mut v = match v {
                        Some(v) => v,
                        None => b.duplicate(&k)?,
                    };
                    if let Some(n) = &lw.k_norm {
                        b.rms_norm_in_place(&mut k, Some(n), spec.head_dim, eps)?;
                    }
                    if spec.v_norm {
                        b.rms_norm_in_place(&mut v, None, spec.head_dim, eps)?;
                    }
                    b.rope(&mut k, rope, spec.n_kv_head, start)?;
                    Some((k, v))
                }
                None => None,
            };
            let kv_layer = a.kv_layer(il);
            let attention = AttentionSpec {
                cache_layer: cache.storage_index(kv_layer).ok_or_else(|| {
                    Error::InvalidArgument(format!("layer {kv_layer} stores no KV"))
                })?,
                n_head: spec.n_head,
                n_kv_head: spec.n_kv_head,
                head_dim: spec.head_dim,
                sliding: spec.sliding,
                window: a.window,
                softcap: a.attn_softcap,
                q_scale: spec.q_scale,
                own_position,
                causal,
            };
            let attn = b.attention(q, kv, cache, &attention, start, seq)?;
            let mut o = b.matmul(&lw.o, &attn)?;
            b.release(attn);
            if output == Output::Last
                && seq > 1
                && il + 1 == a.n_layer()
                && a.family.last_layer_keeps_output_rows_only()
            {
                // the rest of the last layer only for the row that is read (llama.cpp's
                // `inp_out_ids`): less work, and its products at llama.cpp's batch size
                o = b.last_row(o, e)?;
                x = b.last_row(x, e)?;
            }
            if let Some(n) = &lw.post_attn_norm {
                b.rms_norm_in_place(&mut o, Some(n), e, eps)?;
            }
            b.add(&mut x, o)?;

            let h = b.rms_norm(&x, &lw.ffn_norm, eps)?;
            let mut gate_up = b.matmul_many(&[&lw.gate, &lw.up], &h)?.into_iter();
            b.release(h);
            let (Some(gate), Some(up)) = (gate_up.next(), gate_up.next()) else {
                return Err(Error::InvalidArgument(
                    "feed-forward projections missing".into(),
                ));
            };
            let act = b.geglu(gate, &up)?;
            b.release(up);
            let mut f = b.matmul(&lw.down, &act)?;
            b.release(act);
            if let Some(n) = &lw.post_ffn_norm {
                b.rms_norm_in_place(&mut f, Some(n), e, eps)?;
            }
            b.add(&mut x, f)?;

            if let (Some(pw), Some(ple)) = (&lw.ple, ple) {
                let g = b.matmul(&pw.inp_gate, &x)?;
                let g = b.geglu(g, &ple[il])?;
                let mut p = b.matmul(&pw.proj, &g)?;
                b.release(g);
                b.rms_norm_in_place(&mut p, Some(&pw.post_norm), e, eps)?;
                b.add(&mut x, p)?;
            }
            if let Some(s) = lw.output_scale {
                b.scale(&mut x, s)?;
            }
        }
        Ok(x)
    }

    /// Gemma 4's per-layer inputs, one `[seq, width]` activation per layer (llama.cpp
    /// `build_inp_per_layer` and `project_per_layer_inputs`): the token's rows of
    /// `per_layer_token_embd` × √width, plus the scaled input embedding projected by
    /// `per_layer_model_proj` × 1/√n_embd and RMS-normed per layer, the sum × 1/√2.
    fn per_layer_inputs<B: Backend>(
        &self,
        b: &B,
        p: &PleWeights,
        x: &B::Act,
        tokens: &[u32],
    ) -> Result<Vec<B::Act>> {
        let a = &self.arch;
        let width = a.per_layer_input.unwrap_or(0);
        let tok = b.embed(&p.token_embd, tokens, (width as f32).sqrt())?;
        let mut proj = b.matmul(&p.model_proj, x)?;
        b.scale(&mut proj, 1.0 / (a.n_embd as f32).sqrt())?;
        b.rms_norm_in_place(&mut proj, Some(&p.proj_norm), width, a.rms_eps)?;
        b.add(&mut proj, tok)?;
        b.scale(&mut proj, 1.0 / 2f32.sqrt())?;
        b.split_columns(proj, width, a.n_layer())
    }
}
