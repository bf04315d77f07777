//! Agreement with llama.cpp on the real default model, one test binary (scripts/test-aarch64
//! cross-builds and runs it under emulation too).

mod forward_matches_llamacpp;
mod tokenizer_matches_llamacpp;
mod vision_matches_llamacpp;
