//! Every GGUF metadata key and tensor name the engine reads, in one place. Architecture-scoped
//! keys are formatted with the `general.architecture` value, as llama.cpp's `LLM_KV_NAMES`
//! (`src/llama-arch.cpp`) does; tensor names follow its `LLM_TENSOR_NAMES`.

pub const ARCHITECTURE: &str = "general.architecture";
pub const NAME: &str = "general.name";
pub const BASENAME: &str = "general.basename";
pub const FINETUNE: &str = "general.finetune";
pub const SIZE_LABEL: &str = "general.size_label";
pub const FILE_TYPE: &str = "general.file_type";

pub const TOKENS: &str = "tokenizer.ggml.tokens";
pub const SCORES: &str = "tokenizer.ggml.scores";
pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
pub const MERGES: &str = "tokenizer.ggml.merges";
pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
pub const UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
pub const PAD_ID: &str = "tokenizer.ggml.padding_token_id";
pub const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
pub const CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// `{arch}.{suffix}`: the architecture-scoped keys below are suffixes for this.
pub fn scoped(arch: &str, suffix: &str) -> String {
    format!("{arch}.{suffix}")
}

pub const CONTEXT_LENGTH: &str = "context_length";
pub const EMBEDDING_LENGTH: &str = "embedding_length";
pub const EMBEDDING_LENGTH_PER_LAYER: &str = "embedding_length_per_layer_input";
/// A Gemma 4 assistant's: the width of the model it drafts for.
pub const EMBEDDING_LENGTH_OUT: &str = "embedding_length_out";
pub const BLOCK_COUNT: &str = "block_count";
pub const FEED_FORWARD_LENGTH: &str = "feed_forward_length";
pub const EXPERT_COUNT: &str = "expert_count";
pub const HEAD_COUNT: &str = "attention.head_count";
pub const HEAD_COUNT_KV: &str = "attention.head_count_kv";
pub const KEY_LENGTH: &str = "attention.key_length";
pub const VALUE_LENGTH: &str = "attention.value_length";
pub const KEY_LENGTH_SWA: &str = "attention.key_length_swa";
pub const VALUE_LENGTH_SWA: &str = "attention.value_length_swa";
pub const RMS_EPS: &str = "attention.layer_norm_rms_epsilon";
pub const SLIDING_WINDOW: &str = "attention.sliding_window";
pub const SLIDING_WINDOW_PATTERN: &str = "attention.sliding_window_pattern";
pub const SHARED_KV_LAYERS: &str = "attention.shared_kv_layers";
pub const ROPE_FREQ_BASE: &str = "rope.freq_base";
pub const ROPE_FREQ_BASE_SWA: &str = "rope.freq_base_swa";
pub const ROPE_DIMENSION_COUNT: &str = "rope.dimension_count";
pub const ROPE_DIMENSION_COUNT_SWA: &str = "rope.dimension_count_swa";
pub const ROPE_SCALING_TYPE: &str = "rope.scaling.type";
pub const ROPE_SCALING_FACTOR: &str = "rope.scaling.factor";
/// The older name of the linear factor (llama.cpp `LLM_KV_ROPE_SCALE_LINEAR`).
pub const ROPE_SCALE_LINEAR: &str = "rope.scale_linear";
pub const ATTN_LOGIT_SOFTCAPPING: &str = "attn_logit_softcapping";
pub const FINAL_LOGIT_SOFTCAPPING: &str = "final_logit_softcapping";

/// Tensors outside the blocks.
pub const TOKEN_EMBD: &str = "token_embd.weight";
pub const OUTPUT: &str = "output.weight";
pub const OUTPUT_NORM: &str = "output_norm.weight";
pub const ROPE_FREQS: &str = "rope_freqs.weight";
pub const PER_LAYER_TOKEN_EMBD: &str = "per_layer_token_embd.weight";
pub const PER_LAYER_MODEL_PROJ: &str = "per_layer_model_proj.weight";
pub const PER_LAYER_PROJ_NORM: &str = "per_layer_proj_norm.weight";
/// A Gemma 4 assistant's input projection (token embedding ‖ the target's hidden state → its
/// width) and output projection (its hidden state → the target's width, the next step's input).
pub const NEXTN_PRE_PROJECTION: &str = "nextn.pre_projection.weight";
pub const NEXTN_POST_PROJECTION: &str = "nextn.post_projection.weight";

/// `blk.{il}.{part}.weight`.
pub fn block(il: usize, part: &str) -> String {
    format!("blk.{il}.{part}.weight")
}

/// Block tensor parts.
pub mod part {
    pub const ATTN_NORM: &str = "attn_norm";
    pub const ATTN_Q: &str = "attn_q";
    pub const ATTN_K: &str = "attn_k";
    pub const ATTN_V: &str = "attn_v";
    pub const ATTN_QKV: &str = "attn_qkv";
    pub const ATTN_Q_NORM: &str = "attn_q_norm";
    pub const ATTN_K_NORM: &str = "attn_k_norm";
    pub const ATTN_OUTPUT: &str = "attn_output";
    pub const POST_ATTENTION_NORM: &str = "post_attention_norm";
    pub const FFN_NORM: &str = "ffn_norm";
    pub const FFN_GATE: &str = "ffn_gate";
    pub const FFN_UP: &str = "ffn_up";
    pub const FFN_DOWN: &str = "ffn_down";
    pub const FFN_GATE_INP: &str = "ffn_gate_inp";
    pub const POST_FFW_NORM: &str = "post_ffw_norm";
    pub const LAYER_OUTPUT_SCALE: &str = "layer_output_scale";
    pub const PER_LAYER_INP_GATE: &str = "inp_gate";
    pub const PER_LAYER_PROJ: &str = "proj";
    pub const PER_LAYER_POST_NORM: &str = "post_norm";
}
