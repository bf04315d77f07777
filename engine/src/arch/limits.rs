//! Sane upper bounds for the dimensions a GGUF declares, checked before any of them sizes a
//! loop or an allocation: a hostile or damaged header (a `block_count` of 2^60) is refused in
//! one line instead of looping or overflowing. The bounds sit far above every published Gemma
//! (the largest, Gemma 3 27B: 62 layers, 5376 wide, 32 heads, FFN 21504, vocabulary 262144,
//! 128K context) and at llama.cpp's own limits where it has them (`LLAMA_MAX_LAYERS` 512).

use std::path::Path;

use crate::error::{Error, Result};

pub struct Limits;

impl Limits {
    pub const LAYERS: usize = 512;
    pub const WIDTH: usize = 1 << 16;
    pub const HEADS: usize = 1024;
    pub const HEAD_DIM: usize = 4096;
    pub const FF: usize = 1 << 20;
    pub const VOCAB: usize = 1 << 22;
    pub const CONTEXT: usize = 1 << 24;

    /// `value` must be in `1..=max`.
    pub fn check(path: &Path, what: &str, value: usize, max: usize) -> Result<()> {
        if value == 0 || value > max {
            return Err(Error::InvalidModel {
                path: path.to_path_buf(),
                reason: if value == 0 {
                    format!("{what} is zero")
                } else {
                    format!("{what} is {value}, beyond any model Companion can run (at most {max})")
                },
            });
        }
        Ok(())
    }
}
