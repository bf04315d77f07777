//! The GGUF vocabulary: token strings, SentencePiece scores or BPE merges, and token types
//! (llama.cpp's `llama_token_type`: 1 normal, 2 unknown, 3 control, 4 user-defined,
//! 5 unused, 6 byte). As llama.cpp's `llama_vocab::impl::load` does, tokens whose text marks
//! the end of generation (`<end_of_turn>`, Gemma 4's `<turn|>` and `<|tool_response>`, …) are
//! control tokens whatever type the file gives them, and they are where generation stops.

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

/// The tokenizer algorithm the vocabulary is for (`tokenizer.ggml.model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabKind {
    /// SentencePiece (`llama`): Gemma 1-3.
    Spm,
    /// Gemma 4's BPE over SPM-style text (`gemma4`).
    Bpe,
}

/// llama.cpp's end-of-generation token texts (`special_eog_ids`) that Gemma vocabularies use.
const EOG_TEXTS: [&str; 5] = [
    "<end_of_turn>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<|endoftext|>",
];

#[derive(Debug)]
pub struct Vocab {
    pub kind: VocabKind,
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<TokenType>,
    /// The bytes each token stands for in output text (`▁` → space, `<0xNN>` → that byte,
    /// control tokens → nothing).
    pieces: Vec<Vec<u8>>,
    index: HashMap<String, u32>,
    byte_ids: [Option<u32>; 256],
    /// BPE merge ranks by (left, right) token ids (Gemma 4).
    merges: HashMap<(u32, u32), u32>,
    /// Tokens at which generation stops: `<eos>` and every end-of-generation token.
    eog_ids: Vec<u32>,
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
        let kind = match model {
            "llama" => VocabKind::Spm,
            "gemma4" => VocabKind::Bpe,
            other => {
                return Err(bad(format!(
                    "tokenizer model `{other}` is neither Gemma's SentencePiece (`llama`) nor Gemma 4's (`gemma4`) vocabulary"
                )));
            }
        };
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
            None if kind == VocabKind::Bpe => vec![0.0; n],
            None => {
                return Err(bad(
                    "required metadata key `tokenizer.ggml.scores` is missing".into(),
                ));
            }
        };
        let mut types: Vec<TokenType> = m
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

        let index: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut eog_ids = vec![eos_id];
        for text in EOG_TEXTS {
            if let Some(&id) = index.get(text) {
                types[id as usize] = TokenType::Control;
                if !eog_ids.contains(&id) {
                    eog_ids.push(id);
                }
            }
        }
        let merges = match kind {
            VocabKind::Spm => HashMap::new(),
            VocabKind::Bpe => read_merges(m.array(keys::MERGES)?, &index)
                .map_err(|e| bad(format!("`tokenizer.ggml.merges` {e}")))?,
        };
        let pieces = tokens
            .iter()
            .zip(&types)
            .map(|(t, ty)| piece_bytes(t, *ty))
            .collect();
        let mut byte_ids = [None; 256];
        for (i, (t, ty)) in tokens.iter().zip(&types).enumerate() {
            if *ty == TokenType::Byte
                && let Some(b) = parse_byte_token(t)
            {
                byte_ids[b as usize] = Some(i as u32);
            }
        }
        Ok(Vocab {
            kind,
            tokens,
            byte_ids,
            merges,
            eog_ids,
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

    /// The rank of merging `left` and `right` (lower merges first), if they merge.
    pub fn merge_rank(&self, left: u32, right: u32) -> Option<u32> {
        self.merges.get(&(left, right)).copied()
    }

    /// Tokens at which generation stops.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog_ids
    }

    /// The `<0xXX>` token of a byte, for byte fallback.
    pub fn byte_id(&self, byte: u8) -> Option<u32> {
        self.byte_ids[byte as usize]
    }
}

/// Merges are "left right" strings (llama.cpp splits at the first space after the first
/// character); both sides must be tokens.
fn read_merges(
    values: &[candle_core::quantized::gguf_file::Value],
    index: &HashMap<String, u32>,
) -> std::result::Result<HashMap<(u32, u32), u32>, String> {
    let mut merges = HashMap::with_capacity(values.len());
    for (rank, v) in values.iter().enumerate() {
        let line = v
            .to_string()
            .map_err(|_| format!("entry {rank} is not a string"))?;
        let split = line
            .char_indices()
            .skip(1)
            .find(|&(_, c)| c == ' ')
            .map(|(i, _)| i)
            .ok_or_else(|| format!("entry {rank} ({line:?}) is not two tokens"))?;
        let (left, right) = (&line[..split], &line[split + 1..]);
        match (index.get(left), index.get(right)) {
            (Some(&l), Some(&r)) => {
                merges.entry((l, r)).or_insert(rank as u32);
            }
            // llama.cpp keeps such a merge by text, but it can never apply: both sides of a
            // merge are always tokens during BPE
            _ => tracing::debug!(rank, "a merge whose sides are not both tokens is ignored"),
        }
    }
    Ok(merges)
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
