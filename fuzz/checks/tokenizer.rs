//! Arbitrary bytes through both tokenizer algorithms (Gemma 1-3 SentencePiece and Gemma 4 BPE,
//! from the family fixtures' vocabularies) in every special-token mode, and back: nothing may
//! panic, data text may never produce a control token, and decoding is total.

use std::sync::OnceLock;

use engine::GemmaTokenizer;
use engine::gguf::ModelFile;
use engine::tokenizer::{Special, TokenType};

fn tokenizers() -> &'static [GemmaTokenizer] {
    static T: OnceLock<Vec<GemmaTokenizer>> = OnceLock::new();
    T.get_or_init(|| {
        ["gemma3-gqa.q8_0.gguf", "gemma4-bpe.q8_0.gguf"]
            .iter()
            .map(|f| {
                let path = concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../tests/fixtures/gemma-family/"
                )
                .to_string()
                    + f;
                GemmaTokenizer::from_gguf(&ModelFile::open(&path).expect("fixture"))
                    .expect("tokenizer")
            })
            .collect()
    })
}

pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for tok in tokenizers() {
        for mode in [Special::Parse, Special::Plain, Special::Data] {
            let ids = tok
                .encode_with(&text, data.first().is_some_and(|b| b & 1 == 1), mode)
                .expect("encode");
            if mode == Special::Data {
                assert!(
                    ids.iter()
                        .skip(1)
                        .all(|&id| tok.vocab().token_type(id) != Some(TokenType::Control)),
                    "data text produced a control token"
                );
            }
            let _ = tok.decode(&ids);
            let mut stream = tok.stream();
            for &id in &ids {
                let _ = stream.push(id);
            }
            let _ = stream.finish();
        }
    }
}
