//! The tool-call grammar on our vocabulary: llguidance (MIT; the grammar engine llama.cpp
//! uses through `common/llguidance.cpp`) over a `toktrie` token trie built from the GGUF's
//! own tokens, giving the engine one token mask per decode step ([`engine::TokenConstraint`]).
//!
//! The trie holds each token's output bytes ([`engine::tokenizer::Vocab::piece`]); control
//! tokens and Gemma 4's `<|…>` markers are "special" (toktrie's `0xFF` prefix, see
//! llguidance `docs/special_tokens.md`), so a grammar names them as `<|tool_call>` and text
//! can never spell one. Tokenizing (llguidance forces the bytes a grammar fixes) uses our
//! data-mode tokenizer, which is canonical for text.
//!
//! The factory is built once per model (a trie of 262k tokens); a grammar is compiled once
//! per tool set and cloned for each call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent::Tool;
use agent::calls::CallFormat;

use engine::tokenizer::TokenType;
use engine::{ConstraintError, GemmaTokenizer, TokenConstraint};
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory, TokenParser};

use crate::error::{Error, Result};

/// Our tokenizer as llguidance sees it.
struct Env {
    trie: TokTrie,
    tokenizer: GemmaTokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        // text the grammar fixes is data; bytes that are not UTF-8 fall back to the trie
        match std::str::from_utf8(s) {
            Ok(text) => self
                .tokenizer
                .encode(text, false)
                .unwrap_or_else(|_| self.trie.greedy_tokenize(s)),
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

/// The token environment of `tokenizer`: each token's bytes, special tokens marked.
pub fn token_env(tokenizer: &GemmaTokenizer) -> TokEnv {
    let vocab = tokenizer.vocab();
    let words: Vec<Vec<u8>> = (0..vocab.len() as u32)
        .map(|id| {
            let text = vocab.token(id);
            let special = matches!(vocab.token_type(id), Some(TokenType::Control))
                || (matches!(vocab.token_type(id), Some(TokenType::UserDefined))
                    && text.len() > 2
                    && text.starts_with('<')
                    && text.ends_with('>')
                    && (text.starts_with("<|") || text.ends_with("|>")));
            if special {
                let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                w.extend_from_slice(text.as_bytes());
                w
            } else {
                vocab.piece(id).to_vec()
            }
        })
        .collect();
    let eos = tokenizer.end_of_turn_id().unwrap_or(tokenizer.eos_id());
    let info = TokRxInfo::new(words.len() as u32, eos);
    let trie = TokTrie::from(&info, &words);
    Arc::new(Env {
        trie,
        tokenizer: tokenizer.clone(),
    })
}

/// Compiles call grammars for one model and hands out a constraint per call.
pub struct CallGrammar {
    factory: ParserFactory,
    /// The last grammar compiled, by its text: an agent run uses one tool set throughout.
    compiled: Mutex<Option<(String, TokenParser)>>,
    /// Whether another program's tool's grammar compiles, by the grammar's text.
    external_ok: Mutex<HashMap<String, bool>>,
}

impl CallGrammar {
    pub fn new(tokenizer: &GemmaTokenizer) -> Result<Self> {
        let env = token_env(tokenizer);
        let mut factory = ParserFactory::new_simple(&env).map_err(grammar_error)?;
        // llguidance logs to stderr by default; our logs go through tracing
        factory.quiet();
        Ok(CallGrammar {
            factory,
            compiled: Mutex::new(None),
            external_ok: Mutex::new(HashMap::new()),
        })
    }

    /// `tools` without those of other programs (MCP servers' tools, named `server/tool`)
    /// whose schema the grammar engine cannot compile: a server may declare any schema, and
    /// one that fails must cost only its own tool, not every call of the turn. Our own tools'
    /// schemas are known to compile (tested).
    pub fn callable_tools(&self, format: CallFormat, tools: Vec<Tool>) -> Vec<Tool> {
        let mut known = self.external_ok.lock().unwrap_or_else(|e| e.into_inner());
        tools
            .into_iter()
            .filter(|tool| {
                if !tool.name.contains('/') {
                    return true;
                }
                let lark = agent::calls::call_grammar(format, std::slice::from_ref(tool));
                *known.entry(lark).or_insert_with_key(|lark| {
                    let compiled = self
                        .factory
                        .create_parser(TopLevelGrammar::from_lark(lark.clone()));
                    if let Err(e) = &compiled {
                        tracing::warn!(
                            tool = %tool.name,
                            error = %e,
                            "a tool's argument schema cannot be made into a call grammar; it is left out"
                        );
                    }
                    compiled.is_ok()
                })
            })
            .collect()
    }

    /// A fresh constraint for one call under `lark` (see `agent::calls::call_grammar`).
    pub fn constraint(&self, lark: &str) -> Result<CallConstraint> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        let parser = match compiled.as_ref() {
            Some((text, parser)) if text == lark => parser.deep_clone(),
            _ => {
                let parser = self
                    .factory
                    .create_parser(TopLevelGrammar::from_lark(lark.to_string()))
                    .map_err(grammar_error)?;
                *compiled = Some((lark.to_string(), parser.deep_clone()));
                parser
            }
        };
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(Error::Grammar(e));
        }
        Ok(CallConstraint {
            matcher,
            mask: None,
        })
    }
}

fn grammar_error(e: impl std::fmt::Display) -> Error {
    Error::Grammar(e.to_string())
}

/// One call's constraint: the matcher and the mask of the current step.
pub struct CallConstraint {
    matcher: Matcher,
    mask: Option<SimpleVob>,
}

impl TokenConstraint for CallConstraint {
    fn allowed(&mut self) -> std::result::Result<&[u32], ConstraintError> {
        let mask = self
            .matcher
            .compute_mask_or_eos()
            .map_err(|e| ConstraintError(e.to_string()))?;
        Ok(self.mask.insert(mask).as_slice())
    }

    fn accept(&mut self, token: u32) -> std::result::Result<bool, ConstraintError> {
        self.matcher
            .consume_token(token)
            .map_err(|e| ConstraintError(e.to_string()))?;
        Ok(self.matcher.is_stopped())
    }
}

/// Lets every token through and ends the generation at `opener`, a token (Gemma 4's
/// `<|tool_call>`, which streams as no text, so a stop string cannot see it).
pub struct StopAtToken {
    opener: u32,
    all: Vec<u32>,
}

impl StopAtToken {
    pub fn new(opener: u32, vocab_len: usize) -> Self {
        StopAtToken {
            opener,
            all: vec![u32::MAX; vocab_len.div_ceil(32)],
        }
    }
}

impl TokenConstraint for StopAtToken {
    fn allowed(&mut self) -> std::result::Result<&[u32], ConstraintError> {
        Ok(&self.all)
    }

    fn accept(&mut self, token: u32) -> std::result::Result<bool, ConstraintError> {
        Ok(token == self.opener)
    }
}

/// Lets every token through but those that could open a call: Gemma 4's `<|tool_call>`, or,
/// in the fenced format, every token with a backtick in it (so the fence cannot be spelled).
/// What the loop decodes the answer under once the model may make no more calls.
pub struct NoCalls {
    allowed: Vec<u32>,
}

impl NoCalls {
    pub fn new(format: CallFormat, tokenizer: &GemmaTokenizer) -> Self {
        let vocab = tokenizer.vocab();
        let mut allowed = vec![u32::MAX; vocab.len().div_ceil(32)];
        // the bits past the vocabulary's end stay set; the engine never offers those ids
        let mut ban = |id: u32| allowed[id as usize / 32] &= !(1 << (id % 32));
        match format {
            CallFormat::FencedJson => {
                for id in 0..vocab.len() as u32 {
                    if vocab.piece(id).contains(&b'`') {
                        ban(id);
                    }
                }
            }
            CallFormat::Gemma4 => {
                if let Some(id) = vocab.id_of(agent::calls::call_opener(format)) {
                    ban(id);
                }
            }
        }
        NoCalls { allowed }
    }
}

impl TokenConstraint for NoCalls {
    fn allowed(&mut self) -> std::result::Result<&[u32], ConstraintError> {
        Ok(&self.allowed)
    }

    fn accept(&mut self, _token: u32) -> std::result::Result<bool, ConstraintError> {
        Ok(false)
    }
}
