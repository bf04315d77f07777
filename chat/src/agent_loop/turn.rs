//! The agent's transcript as token ids: `agent::calls` renders it in the model's format as
//! pieces, and every text piece — the user's words, file contents, tool results — is
//! tokenized as data ([`engine::tokenizer::Special::Data`]), never as special tokens, so no
//! text can close a turn or open a call; only the pieces the format itself names become
//! control tokens.

use agent::calls::{self, CallFormat, Piece};
use engine::tokenizer::{ChatFormat, Segment};
use engine::{GemmaTokenizer, GenerateParams, Generation, StopReason, TokenConstraint};

use super::grammar::StopAtToken;
use crate::error::Result;

/// Make a free generation stop where the model opens a call: at the opener as a stop string
/// (Gemma 1-3's fence, added to `params`), or at Gemma 4's `<|tool_call>` token, which streams
/// as no text (the returned constraint ends the generation there).
pub fn watch_for_call(
    format: CallFormat,
    tokenizer: &GemmaTokenizer,
    params: &mut GenerateParams,
) -> Option<Box<dyn TokenConstraint>> {
    let opener = calls::call_opener(format);
    match format {
        CallFormat::FencedJson => {
            params.stop_strings.push(opener.to_string());
            None
        }
        CallFormat::Gemma4 => tokenizer
            .vocab()
            .id_of(opener)
            .map(|id| Box::new(StopAtToken::new(id, tokenizer.vocab().len())) as _),
    }
}

/// Whether a generation set up by [`watch_for_call`] stopped at the opener (and not at another
/// stop string a caller gave).
pub fn opened_call(
    format: CallFormat,
    tokenizer: &GemmaTokenizer,
    generation: &Generation,
) -> bool {
    match format {
        // the ids hold the token that completed the stop string
        CallFormat::FencedJson => {
            generation.stop_reason == StopReason::StopString
                && tokenizer
                    .decode(&generation.ids)
                    .is_ok_and(|t| t.contains(calls::call_opener(format)))
        }
        CallFormat::Gemma4 => generation.stop_reason == StopReason::ConstraintDone,
    }
}

/// The prompt of the call's body: `prompt`, then the model's text and the opener as the
/// transcript will hold them (a token that ran past the fence is dropped), or Gemma 4's ids as
/// decoded (ending with `<|tool_call>`).
pub fn call_prompt(
    format: CallFormat,
    tokenizer: &GemmaTokenizer,
    mut prompt: Vec<u32>,
    opened: &Generation,
) -> Result<Vec<u32>> {
    match format {
        CallFormat::FencedJson => prompt.extend(encode_pieces(
            tokenizer,
            &[Piece::Text(format!(
                "{}{}",
                opened.text,
                calls::call_opener(format)
            ))],
            false,
        )?),
        CallFormat::Gemma4 => prompt.extend_from_slice(&opened.ids),
    }
    Ok(prompt)
}

/// The prompt to go on from the model's text *without* the call it opened: `prompt`, then
/// the text before the opener (Gemma 1-3), or the ids before `<|tool_call>` (Gemma 4).
pub fn answer_prompt(
    format: CallFormat,
    tokenizer: &GemmaTokenizer,
    mut prompt: Vec<u32>,
    opened: &Generation,
) -> Result<Vec<u32>> {
    match format {
        CallFormat::FencedJson => {
            if !opened.text.is_empty() {
                prompt.extend(encode_pieces(
                    tokenizer,
                    &[Piece::Text(opened.text.clone())],
                    false,
                )?);
            }
        }
        CallFormat::Gemma4 => {
            let n = opened.ids.len().saturating_sub(1);
            prompt.extend_from_slice(&opened.ids[..n]);
        }
    }
    Ok(prompt)
}

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
