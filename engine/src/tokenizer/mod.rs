//! The tokenizer, built from the GGUF's own vocabulary: no tokenizer.json is needed.
//!
//! Gemma's GGUF carries a SentencePiece-BPE vocabulary (`tokenizer.ggml.model = "llama"`):
//! tokens, scores and token types. We follow llama.cpp's `llm_tokenizer_spm`
//! (`src/llama-vocab.cpp`) and express it as a `tokenizers::Tokenizer`:
//! - control tokens (`<bos>`, `<start_of_turn>`, …) and user-defined tokens (`\n`, runs of
//!   spaces and tabs, HTML tags) are matched in the raw text first, as llama.cpp's
//!   `tokenizer_st_partition` does with `parse_special = true`: added tokens, not normalized;
//! - the rest has spaces replaced by `▁` (no space prefix unless the GGUF asks for one);
//! - SPM merges the adjacent pair whose concatenation has the highest score (`spm`, the
//!   tokenizer's model);
//! - characters the vocabulary lacks fall back to `<0xXX>` byte tokens.

mod chat_template;
mod spm;
mod stream;
mod vocab;

pub use chat_template::{ChatMessage, Role, render_chat, render_open_user_turn};
pub use stream::TokenStream;
pub use vocab::{TokenType, Vocab};

use std::sync::Arc;

use tokenizers::decoders::DecoderWrapper;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::normalizers::{NormalizerWrapper, Prepend, Replace};
use tokenizers::{AddedToken, PostProcessorWrapper, PreTokenizerWrapper, TokenizerImpl};

use spm::SpmModel;

/// `tokenizers`' pipeline (added tokens, normalizer, decoder) around our SPM model.
pub type Tokenizer = TokenizerImpl<
    SpmModel,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

use crate::error::{Error, Result};
use crate::gguf::ModelFile;

/// The engine's tokenizer: a `tokenizers::Tokenizer` plus the vocabulary facts the engine needs
/// (special ids, per-token byte pieces for streaming).
#[derive(Clone)]
pub struct GemmaTokenizer {
    inner: Arc<Tokenizer>,
    vocab: Arc<Vocab>,
}

impl std::fmt::Debug for GemmaTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmaTokenizer")
            .field("n_vocab", &self.vocab.len())
            .finish()
    }
}

impl GemmaTokenizer {
    pub fn from_gguf(file: &ModelFile) -> Result<Self> {
        let vocab = Arc::new(Vocab::from_gguf(file)?);
        let inner = build_tokenizer(&vocab)?;
        Ok(GemmaTokenizer {
            inner: Arc::new(inner),
            vocab,
        })
    }

    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    pub fn bos_id(&self) -> u32 {
        self.vocab.bos_id
    }

    pub fn eos_id(&self) -> u32 {
        self.vocab.eos_id
    }

    /// The token that ends a chat turn (`<end_of_turn>`), if the vocabulary has one.
    pub fn end_of_turn_id(&self) -> Option<u32> {
        self.vocab.id_of("<end_of_turn>")
    }

    /// Tokens at which generation stops: `<eos>` and `<end_of_turn>`.
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut ids = vec![self.vocab.eos_id];
        ids.extend(self.end_of_turn_id());
        ids
    }

    /// Tokenize `text`, recognizing special-token text, optionally with a leading `<bos>`.
    pub fn encode(&self, text: &str, add_bos: bool) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if add_bos {
            ids.push(self.vocab.bos_id);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Decode ids back to text; special tokens are kept as their text.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// A streaming decoder that yields whole UTF-8 text pieces.
    pub fn stream(&self) -> TokenStream {
        TokenStream::new(self.vocab.clone())
    }
}

fn build_tokenizer(vocab: &Arc<Vocab>) -> Result<Tokenizer> {
    let tok_err = |e: tokenizers::Error| Error::Tokenizer(e.to_string());
    let mut tokenizer = Tokenizer::new(SpmModel::new(vocab.clone()));

    let space = Replace::new(" ", "▁").map_err(tok_err)?;
    let normalizer: NormalizerWrapper = if vocab.add_space_prefix {
        tokenizers::normalizers::Sequence::new(vec![Prepend::new("▁".into()).into(), space.into()])
            .into()
    } else {
        space.into()
    };
    tokenizer.with_normalizer(Some(normalizer));

    let decoder = DecoderSequence::new(vec![
        DecoderWrapper::Replace(Replace::new("▁", " ").map_err(tok_err)?),
        DecoderWrapper::ByteFallback(ByteFallback::new()),
        DecoderWrapper::Fuse(Fuse::new()),
    ]);
    tokenizer.with_decoder(Some(decoder));

    // Control tokens are special; user-defined ones are plain added tokens. Both match the raw
    // text before normalization, as llama.cpp partitions before SPM sees the text.
    let special: Vec<AddedToken> = vocab
        .ids_of_type(TokenType::Control)
        .map(|id| AddedToken::from(vocab.token(id).to_string(), true).normalized(false))
        .collect();
    let user: Vec<AddedToken> = vocab
        .ids_of_type(TokenType::UserDefined)
        .map(|id| AddedToken::from(vocab.token(id).to_string(), false).normalized(false))
        .collect();
    tokenizer.add_special_tokens(&special);
    tokenizer.add_tokens(&user);
    Ok(tokenizer)
}
