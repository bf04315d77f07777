//! The agent's transcript as token ids: `agent::calls` renders it in the model's format as
//! pieces, and every text piece — the user's words, file contents, tool results — is
//! tokenized as data ([`engine::tokenizer::Special::Data`]), never as special tokens, so no
//! text can close a turn or open a call; only the pieces the format itself names become
//! control tokens.

use agent::calls::{CallFormat, Piece};
use engine::GemmaTokenizer;
use engine::tokenizer::{ChatFormat, Segment};

use crate::error::Result;

/// The call format of this model's vocabulary: Gemma 4's tokens where it has them.
pub fn call_format(tokenizer: &GemmaTokenizer) -> CallFormat {
    let vocab = tokenizer.vocab();
    if tokenizer.chat_format() == ChatFormat::Turn
        && [
            "<|tool_call>",
            "<tool_call|>",
            "<|tool_response>",
            "<tool_response|>",
            "<|\"|>",
            "<|tool>",
            "<tool|>",
        ]
        .iter()
        .all(|t| vocab.id_of(t).is_some())
    {
        CallFormat::Gemma4
    } else {
        CallFormat::FencedJson
    }
}

/// Pieces as the engine's segments: control tokens by name, text as data.
pub fn segments(pieces: &[Piece]) -> Vec<Segment> {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Control(name) => Segment::Control(name),
            Piece::Text(text) => Segment::Text(text.clone()),
        })
        .collect()
}

pub fn encode_pieces(
    tokenizer: &GemmaTokenizer,
    pieces: &[Piece],
    add_bos: bool,
) -> Result<Vec<u32>> {
    Ok(tokenizer.encode_segments(&segments(pieces), add_bos)?)
}
