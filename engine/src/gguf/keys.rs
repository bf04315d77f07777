//! Every GGUF metadata key the engine reads, in one place. Architecture-scoped keys are
//! formatted with the `general.architecture` value, as llama.cpp's `LLM_KV_NAMES` does.

pub const ARCHITECTURE: &str = "general.architecture";
pub const NAME: &str = "general.name";
pub const FILE_TYPE: &str = "general.file_type";

pub const TOKENS: &str = "tokenizer.ggml.tokens";
pub const SCORES: &str = "tokenizer.ggml.scores";
pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
pub const UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
pub const PAD_ID: &str = "tokenizer.ggml.padding_token_id";
pub const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";

pub fn context_length(arch: &str) -> String {
    format!("{arch}.context_length")
}
pub fn embedding_length(arch: &str) -> String {
    format!("{arch}.embedding_length")
}
pub fn block_count(arch: &str) -> String {
    format!("{arch}.block_count")
}
pub fn feed_forward_length(arch: &str) -> String {
    format!("{arch}.feed_forward_length")
}
pub fn head_count(arch: &str) -> String {
    format!("{arch}.attention.head_count")
}
pub fn head_count_kv(arch: &str) -> String {
    format!("{arch}.attention.head_count_kv")
}
pub fn key_length(arch: &str) -> String {
    format!("{arch}.attention.key_length")
}
pub fn value_length(arch: &str) -> String {
    format!("{arch}.attention.value_length")
}
pub fn rms_eps(arch: &str) -> String {
    format!("{arch}.attention.layer_norm_rms_epsilon")
}
pub fn sliding_window(arch: &str) -> String {
    format!("{arch}.attention.sliding_window")
}
pub fn rope_freq_base(arch: &str) -> String {
    format!("{arch}.rope.freq_base")
}
pub fn rope_freq_base_swa(arch: &str) -> String {
    format!("{arch}.rope.freq_base_swa")
}
pub fn final_logit_softcapping(arch: &str) -> String {
    format!("{arch}.final_logit_softcapping")
}
