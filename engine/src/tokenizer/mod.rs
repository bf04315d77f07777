//! The tokenizer, built from the GGUF's own vocabulary: no tokenizer.json is needed.
//!
//! Gemma 1-3 GGUFs carry a SentencePiece vocabulary (`tokenizer.ggml.model = "llama"`): tokens,
//! scores and token types; Gemma 4's carry a BPE one (`"gemma4"`) with merges. We follow
//! llama.cpp's `llm_tokenizer_spm` and `llm_tokenizer_bpe` (`src/llama-vocab.cpp`) and express
//! each as a `tokenizers::Model` inside a `tokenizers::Tokenizer`:
//! - special tokens are cut out of the raw text first (llama.cpp `tokenizer_st_partition`),
//!   longest match first; which ones depends on the [`Special`] mode;
//! - the rest has spaces replaced by `▁` (no space prefix unless the GGUF asks for one);
//! - SPM merges the adjacent pair whose concatenation has the highest score (`spm`); BPE the
//!   pair with the lowest merge rank (`bpe`);
//! - characters the vocabulary lacks fall back to `<0xXX>` byte tokens.
//!
//! Text from users, documents, files and tools is tokenized in [`Special::Data`] mode: it can
//! never become a control token or one of Gemma 4's tool and channel markers, so it cannot
//! close a turn or forge a call. Chat prompts are rendered as segments ([`chat_template`]),
//! whose control tokens the template emits by id.

mod bpe;
mod chat_template;
mod spm;
mod stream;
mod vocab;

pub use chat_template::{
    ChatFormat, ChatMessage, Role, Segment, render_chat, render_open_user_turn, segments_to_string,
};
pub use stream::TokenStream;
pub use vocab::{TokenType, Vocab, VocabKind};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokenizers::decoders::DecoderWrapper;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::normalizers::{NormalizerWrapper, Prepend, Replace};
use tokenizers::{AddedToken, Model, PostProcessorWrapper, PreTokenizerWrapper, TokenizerImpl};

use bpe::BpeModel;
use spm::{NoTrainer, SpmModel};

use crate::error::{Error, Result};
use crate::gguf::ModelFile;

/// The vocabulary's algorithm as one `tokenizers::Model`.
#[derive(Debug, Clone)]
pub enum GemmaModel {
    Spm(SpmModel),
    Bpe(BpeModel),
}

/// `tokenizers`' pipeline (added tokens, normalizer, decoder) around our models.
pub type Tokenizer = TokenizerImpl<
    GemmaModel,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// Which special tokens are recognized in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// Control and user-defined tokens (llama.cpp `parse_special = true`): raw prompts a
    /// person writes on purpose (`companion generate --raw`, `tokenize`).
    Parse,
    /// Only user-defined tokens (llama.cpp `parse_special = false`).
    Plain,
    /// Untrusted text: no control tokens and none of the turn, tool or channel markers
    /// (user-defined tokens written like `<|…>` or `<…|>`); other user-defined tokens (runs of
    /// whitespace, HTML tags) still match, as they do in llama.cpp.
    Data,
}

/// The engine's tokenizer: `tokenizers` pipelines for each [`Special`] mode, plus the
/// vocabulary facts the engine needs (special ids, byte pieces for streaming, the chat format).
#[derive(Clone)]
pub struct GemmaTokenizer {
    parse: Arc<Tokenizer>,
    data: Arc<Tokenizer>,
    /// Built on first use (tests and `tokenize --plain` need it, chat does not).
    plain: Arc<OnceLock<std::result::Result<Tokenizer, String>>>,
    vocab: Arc<Vocab>,
    format: ChatFormat,
}

impl std::fmt::Debug for GemmaTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmaTokenizer")
            .field("n_vocab", &self.vocab.len())
            .field("kind", &self.vocab.kind)
            .finish()
    }
}

impl GemmaTokenizer {
    pub fn from_gguf(file: &ModelFile) -> Result<Self> {
        let vocab = Arc::new(Vocab::from_gguf(file)?);
        let format = if vocab.id_of("<|turn>").is_some() && vocab.id_of("<turn|>").is_some() {
            ChatFormat::Turn
        } else {
            ChatFormat::StartOfTurn
        };
        Ok(GemmaTokenizer {
            parse: Arc::new(build_tokenizer(&vocab, Special::Parse)?),
            data: Arc::new(build_tokenizer(&vocab, Special::Data)?),
            plain: Arc::new(OnceLock::new()),
            vocab,
            format,
        })
    }

    /// The pipeline of `Special::Parse` mode.
    pub fn inner(&self) -> &Tokenizer {
        &self.parse
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

    /// The turn markers this vocabulary has.
    pub fn chat_format(&self) -> ChatFormat {
        self.format
    }

    /// The token that ends a chat turn (`<end_of_turn>`, `<turn|>`), if the vocabulary has one.
    pub fn end_of_turn_id(&self) -> Option<u32> {
        self.vocab.id_of(self.format.markers().1)
    }

    /// Tokens at which generation stops: `<eos>` and every end-of-generation token.
    pub fn stop_ids(&self) -> Vec<u32> {
        self.vocab.eog_ids().to_vec()
    }

    /// Tokenize untrusted `text` ([`Special::Data`]), optionally with a leading `<bos>`.
    pub fn encode(&self, text: &str, add_bos: bool) -> Result<Vec<u32>> {
        self.encode_with(text, add_bos, Special::Data)
    }

    /// Tokenize `text`, recognizing special-token text ([`Special::Parse`]).
    pub fn encode_special(&self, text: &str, add_bos: bool) -> Result<Vec<u32>> {
        self.encode_with(text, add_bos, Special::Parse)
    }

    pub fn encode_with(&self, text: &str, add_bos: bool, special: Special) -> Result<Vec<u32>> {
        let tokenizer = match special {
            Special::Parse => &*self.parse,
            Special::Data => &*self.data,
            Special::Plain => self
                .plain
                .get_or_init(|| {
                    build_tokenizer(&self.vocab, Special::Plain).map_err(|e| e.to_string())
                })
                .as_ref()
                .map_err(|e| Error::Tokenizer(e.clone()))?,
        };
        let enc = tokenizer
            .encode_fast(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if add_bos {
            ids.push(self.vocab.bos_id);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Tokenize rendered segments: control tokens by id, text as [`Special::Data`].
    pub fn encode_segments(&self, segments: &[Segment], add_bos: bool) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        if add_bos {
            ids.push(self.vocab.bos_id);
        }
        for segment in segments {
            match segment {
                Segment::Control(name) => ids.push(self.vocab.id_of(name).ok_or_else(|| {
                    Error::Tokenizer(format!("the vocabulary has no `{name}` token"))
                })?),
                Segment::Text(text) if !text.is_empty() => {
                    ids.extend(self.encode(text, false)?);
                }
                Segment::Text(_) => {}
                Segment::Image(_) => {
                    return Err(Error::InvalidArgument(
                        "a prompt with pictures is not token ids alone".into(),
                    ));
                }
            }
        }
        Ok(ids)
    }

    /// The segments as prompt pieces: token ids, and each picture between its markers
    /// (`<start_of_image>` ends the ids before it, `<end_of_image>` starts the ids after it,
    /// as llama.cpp's `mtmd_tokenize` lays out Gemma 3's pictures). Text on either side of a
    /// picture is tokenized on its own, as mtmd tokenizes the text between markers.
    pub fn encode_segments_parts(
        &self,
        segments: &[Segment],
        add_bos: bool,
    ) -> Result<Vec<crate::vision::PromptPart>> {
        use crate::vision::{ImageMarkers, PromptPart};
        let mut parts = Vec::new();
        let mut ids = if add_bos {
            vec![self.vocab.bos_id]
        } else {
            Vec::new()
        };
        let mut markers = None;
        for segment in segments {
            if let Segment::Image(image) = segment {
                let m = match markers {
                    Some(m) => m,
                    None => *markers.insert(ImageMarkers::of(self)?),
                };
                ids.push(m.start);
                parts.push(PromptPart::Ids(std::mem::take(&mut ids)));
                parts.push(PromptPart::Image(image.clone()));
                ids.push(m.end);
            } else {
                ids.extend(self.encode_segments(std::slice::from_ref(segment), false)?);
            }
        }
        parts.push(PromptPart::Ids(ids));
        Ok(parts)
    }

    /// A conversation in this model's chat format, `<bos>` first.
    pub fn encode_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>> {
        self.encode_segments(
            &render_chat(self.format, messages, add_generation_prompt),
            true,
        )
    }

    /// [`Self::encode_chat`] for a conversation whose messages may hold pictures.
    pub fn encode_chat_parts(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<crate::vision::PromptPart>> {
        self.encode_segments_parts(
            &render_chat(self.format, messages, add_generation_prompt),
            true,
        )
    }

    /// [`Self::encode_open_user_turn`] for a history whose messages may hold pictures.
    pub fn encode_open_user_turn_parts(
        &self,
        history: &[ChatMessage],
        draft: &str,
    ) -> Result<Vec<crate::vision::PromptPart>> {
        self.encode_segments_parts(&render_open_user_turn(self.format, history, draft), true)
    }

    /// `history` and an open user turn holding `draft` (see [`render_open_user_turn`]).
    pub fn encode_open_user_turn(&self, history: &[ChatMessage], draft: &str) -> Result<Vec<u32>> {
        self.encode_segments(&render_open_user_turn(self.format, history, draft), true)
    }

    /// Decode ids back to text; special tokens are kept as their text.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.parse
            .decode(ids, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// A streaming decoder that yields whole UTF-8 text pieces.
    pub fn stream(&self) -> TokenStream {
        TokenStream::new(self.vocab.clone())
    }
}

/// Gemma 4's markers (`<|turn>`, `<tool_call|>`, `<|"|>`, …): user-defined in its GGUFs, so
/// llama.cpp matches them even without special parsing; data must not.
fn is_marker(token: &str) -> bool {
    token.len() > 2
        && token.starts_with('<')
        && token.ends_with('>')
        && (token.starts_with("<|") || token.ends_with("|>"))
}

fn build_tokenizer(vocab: &Arc<Vocab>, special: Special) -> Result<Tokenizer> {
    let tok_err = |e: tokenizers::Error| Error::Tokenizer(e.to_string());
    let model = match vocab.kind {
        VocabKind::Spm => GemmaModel::Spm(SpmModel::new(vocab.clone())),
        VocabKind::Bpe => GemmaModel::Bpe(BpeModel::new(vocab.clone())),
    };
    let mut tokenizer = Tokenizer::new(model);

    let space = Replace::new(" ", "▁").map_err(tok_err)?;
    let normalizer: NormalizerWrapper = if vocab.add_space_prefix {
        tokenizers::normalizers::Sequence::new(vec![Prepend::new("▁".into()).into(), space.into()])
            .into()
    } else {
        space.into()
    };
    tokenizer
        .with_normalizer(Some(normalizer))
        .map_err(tok_err)?;

    let decoder = DecoderSequence::new(vec![
        DecoderWrapper::Replace(Replace::new("▁", " ").map_err(tok_err)?),
        DecoderWrapper::ByteFallback(ByteFallback::new()),
        DecoderWrapper::Fuse(Fuse::new()),
    ]);
    tokenizer.with_decoder(Some(decoder));

    // Control tokens are special; user-defined ones are plain added tokens. Both match the raw
    // text before normalization, as llama.cpp partitions before SPM or BPE sees the text.
    if special == Special::Parse || special == Special::Plain {
        let control: Vec<AddedToken> = vocab
            .ids_of_type(TokenType::Control)
            .map(|id| AddedToken::from(vocab.token(id).to_string(), true).normalized(false))
            .collect();
        tokenizer.add_special_tokens(control).map_err(tok_err)?;
    }
    let user: Vec<AddedToken> = vocab
        .ids_of_type(TokenType::UserDefined)
        .filter(|&id| special != Special::Data || !is_marker(vocab.token(id)))
        .map(|id| AddedToken::from(vocab.token(id).to_string(), false).normalized(false))
        .collect();
    tokenizer.add_tokens(user).map_err(tok_err)?;
    if special == Special::Plain {
        // control tokens stay in the vocabulary for decoding but are not matched in text
        tokenizer.set_encode_special_tokens(true);
    }
    Ok(tokenizer)
}

impl Model for GemmaModel {
    type Trainer = NoTrainer<GemmaModel>;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<tokenizers::Token>> {
        match self {
            GemmaModel::Spm(m) => m.tokenize(sequence),
            GemmaModel::Bpe(m) => m.tokenize(sequence),
        }
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        match self {
            GemmaModel::Spm(m) => m.token_to_id(token),
            GemmaModel::Bpe(m) => m.token_to_id(token),
        }
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        match self {
            GemmaModel::Spm(m) => m.id_to_token(id),
            GemmaModel::Bpe(m) => m.id_to_token(id),
        }
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        match self {
            GemmaModel::Spm(m) => m.get_vocab(),
            GemmaModel::Bpe(m) => m.get_vocab(),
        }
    }

    fn get_vocab_size(&self) -> usize {
        match self {
            GemmaModel::Spm(m) => m.get_vocab_size(),
            GemmaModel::Bpe(m) => m.get_vocab_size(),
        }
    }

    fn save(&self, folder: &Path, prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        match self {
            GemmaModel::Spm(m) => m.save(folder, prefix),
            GemmaModel::Bpe(m) => m.save(folder, prefix),
        }
    }

    fn get_trainer(&self) -> Self::Trainer {
        NoTrainer::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn markers_are_told_from_html_tags() {
        for m in ["<|turn>", "<turn|>", "<|tool_call>", "<|\"|>", "<channel|>"] {
            assert!(super::is_marker(m), "{m}");
        }
        for t in ["<h1>", "</table>", "<|", "\n", "<start_of_turn>"] {
            assert!(!super::is_marker(t), "{t}");
        }
    }
}
