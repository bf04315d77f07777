//! The GGUF vocabulary: token strings, SentencePiece scores and token types
//! (llama.cpp's `llama_token_type`: 1 normal, 2 unknown, 3 control, 4 user-defined,
//! 5 unused, 6 byte).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::gguf::{ModelFile, keys, value_to_u64};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_gguf(v: u64) -> Self {
        match v {
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Normal,
        }
    }
}

#[derive(Debug)]
pub struct Vocab {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<TokenType>,
    /// The bytes each token stands for in output text (`▁` → space, `<0xNN>` → that byte,
    /// control tokens → nothing).
    pieces: Vec<Vec<u8>>,
    index: HashMap<String, u32>,
    byte_ids: [Option<u32>; 256],
    pub bos_id: u32,
    pub eos_id: u32,
    pub unk_id: u32,
    pub pad_id: Option<u32>,
    pub add_space_prefix: bool,
}

impl Vocab {
    pub fn from_gguf(file: &ModelFile) -> Result<Self> {
        let m = file.meta();
        let bad = |reason: String| Error::InvalidModel {
            path: file.path().to_path_buf(),
            reason,
        };
        let model = m.string(keys::TOKENIZER_MODEL)?;
        if model != "llama" {
            return Err(bad(format!(
                "tokenizer model `{model}` is not the SentencePiece (`llama`) vocabulary Gemma uses"
            )));
        }
        let tokens: Vec<String> = m
            .array(keys::TOKENS)?
            .iter()
            .map(|v| v.to_string().cloned())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad("`tokenizer.ggml.tokens` holds a non-string".into()))?;
        let n = tokens.len();
        let scores: Vec<f32> = match m.get(keys::SCORES) {
            Some(v) => v
                .to_vec()
                .map_err(|_| bad("`tokenizer.ggml.scores` is not an array".into()))?
                .iter()
                .map(|v| crate::gguf::value_to_f64(v).map(|x| x as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("`tokenizer.ggml.scores` holds a non-number".into()))?,
            None => {
                return Err(bad(
                    "required metadata key `tokenizer.ggml.scores` is missing".into(),
                ));
            }
        };
        let types: Vec<TokenType> = m
            .array(keys::TOKEN_TYPE)?
            .iter()
            .map(|v| {
                // token types are stored as i32
                match v {
                    candle_core::quantized::gguf_file::Value::I32(x) => Some(*x as i64 as u64),
                    other => value_to_u64(other),
                }
                .map(TokenType::from_gguf)
            })
            .collect::<Option<_>>()
            .ok_or_else(|| bad("`tokenizer.ggml.token_type` holds a non-integer".into()))?;
        if scores.len() != n || types.len() != n {
            return Err(bad(format!(
                "vocabulary arrays disagree: {n} tokens, {} scores, {} types",
                scores.len(),
                types.len()
            )));
        }
        let id = |key: &str, default: Option<u32>| -> Result<u32> {
            let v = match m.opt_usize(key)? {
                Some(v) => v as u32,
                None => default
                    .ok_or_else(|| bad(format!("required metadata key `{key}` is missing")))?,
            };
            if v as usize >= n {
                return Err(bad(format!(
                    "`{key}` = {v} is outside the vocabulary of {n}"
                )));
            }
            Ok(v)
        };
        let bos_id = id(keys::BOS_ID, None)?;
        let eos_id = id(keys::EOS_ID, None)?;
        let unk_id = id(keys::UNK_ID, Some(0))?;
        let pad_id = m.opt_usize(keys::PAD_ID)?.map(|v| v as u32);
        let add_space_prefix = m.opt_bool(keys::ADD_SPACE_PREFIX).unwrap_or(false);

        let pieces = tokens
            .iter()
            .zip(&types)
            .map(|(t, ty)| piece_bytes(t, *ty))
            .collect();
        let index = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut byte_ids = [None; 256];
        for (i, (t, ty)) in tokens.iter().zip(&types).enumerate() {
            if *ty == TokenType::Byte {
                if let Some(b) = parse_byte_token(t) {
                    byte_ids[b as usize] = Some(i as u32);
                }
            }
        }
        Ok(Vocab {
            tokens,
            byte_ids,
            scores,
            types,
            pieces,
            index,
            bos_id,
            eos_id,
            unk_id,
            pad_id,
            add_space_prefix,
        })
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn token(&self, id: u32) -> &str {
        &self.tokens[id as usize]
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.index.get(token).copied()
    }

    /// The bytes token `id` contributes to output text; empty for control tokens and ids
    /// outside the vocabulary.
    pub fn piece(&self, id: u32) -> &[u8] {
        self.pieces
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn ids_of_type(&self, ty: TokenType) -> impl Iterator<Item = u32> + '_ {
        self.types
            .iter()
            .enumerate()
            .filter(move |(_, t)| **t == ty)
            .map(|(i, _)| i as u32)
    }

    pub fn score(&self, id: u32) -> f32 {
        self.scores
            .get(id as usize)
            .copied()
            .unwrap_or(f32::NEG_INFINITY)
    }

    /// The `<0xXX>` token of a byte, for byte fallback.
    pub fn byte_id(&self, byte: u8) -> Option<u32> {
        self.byte_ids[byte as usize]
    }
}

fn piece_bytes(token: &str, ty: TokenType) -> Vec<u8> {
    match ty {
        TokenType::Control | TokenType::Unknown | TokenType::Unused => Vec::new(),
        TokenType::Byte => parse_byte_token(token)
            .map(|b| vec![b])
            .unwrap_or_else(|| token.as_bytes().to_vec()),
        TokenType::Normal | TokenType::UserDefined => token.replace('▁', " ").into_bytes(),
    }
}

/// `<0x0A>` → 0x0A.
fn parse_byte_token(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_parse() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(0x0A));
        assert_eq!(parse_byte_token("<0xFF>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0xZZ>"), None);
        assert_eq!(parse_byte_token("hello"), None);
    }

    #[test]
    fn pieces_render_spaces_and_hide_control_tokens() {
        assert_eq!(piece_bytes("▁hello", TokenType::Normal), b" hello");
        assert_eq!(piece_bytes("<start_of_turn>", TokenType::Control), b"");
        assert_eq!(piece_bytes("<0xE4>", TokenType::Byte), vec![0xE4]);
        assert_eq!(piece_bytes("\n\n", TokenType::UserDefined), b"\n\n");
    }
}
