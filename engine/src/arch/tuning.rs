//! Base (pretrained) or instruction-tuned: what a model does with a chat message. A base model
//! continues the text it is given instead of answering it, so the app and `companion` say so
//! where the user meets it (a new conversation, a document summary, the agent).
//!
//! GGUF files say it in `general.finetune` (llama.cpp's converter writes the Hugging Face
//! repository's suffix there: "it", "pt", "it-qat"), else in `general.name` /
//! `general.basename` ("Gemma 3 1b It"). Failing both, a chat template in the file counts as
//! instruction tuning (converters copy the template of tuned models' tokenizer configs), and a
//! file with none of these is taken for a base model: guessing "instruct" would hide the notice
//! from exactly the people who need it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tuning {
    /// Pretrained only: continues text.
    Base,
    /// Instruction-tuned: answers in turns.
    Instruct,
}

/// Words (lower case, split on anything not a letter or digit) that name instruction tuning.
const INSTRUCT_WORDS: &[&str] = &["it", "instruct", "instruction", "chat"];
/// Words that name a pretrained-only model.
const BASE_WORDS: &[&str] = &["pt", "base", "pretrained", "pretrain"];

impl Tuning {
    /// `finetune`: `general.finetune`; `names`: `general.name` then `general.basename`;
    /// `has_chat_template`: the file holds `tokenizer.chat_template`.
    pub fn detect(finetune: Option<&str>, names: &[Option<&str>], has_chat_template: bool) -> Self {
        let said = std::iter::once(finetune)
            .chain(names.iter().copied())
            .flatten()
            .find_map(Self::named_in);
        said.unwrap_or(if has_chat_template {
            Self::Instruct
        } else {
            Self::Base
        })
    }

    /// What `text` says, if it names either kind.
    fn named_in(text: &str) -> Option<Self> {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        if words.iter().any(|w| INSTRUCT_WORDS.contains(w)) {
            Some(Self::Instruct)
        } else if words.iter().any(|w| BASE_WORDS.contains(w)) {
            Some(Self::Base)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Base => "base",
            Self::Instruct => "instruct",
        }
    }

    /// The one sentence a user sees before chatting with a base model. It says what to use
    /// instead, not how: the app and the command line each add where their user does that.
    pub fn notice(self) -> Option<&'static str> {
        match self {
            Self::Base => Some(
                "This is a base model: it continues the text it is given rather than following \
                 it, so its replies, summaries and tool calls are unreliable; for chat, use an \
                 instruction-tuned Gemma (a GGUF with \"-it\" in its name).",
            ),
            Self::Instruct => None,
        }
    }
}

impl std::fmt::Display for Tuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Tuning::{self, Base, Instruct};

    #[test]
    fn the_finetune_key_decides_first() {
        assert_eq!(
            Tuning::detect(Some("it"), &[Some("Gemma 3 270m")], false),
            Instruct
        );
        assert_eq!(Tuning::detect(Some("it-qat"), &[None], false), Instruct);
        assert_eq!(
            Tuning::detect(Some("pt"), &[Some("Gemma 3 1b It")], true),
            Base
        );
    }

    #[test]
    fn the_name_speaks_when_the_finetune_key_is_silent() {
        assert_eq!(
            Tuning::detect(None, &[Some("Gemma 3 1b It")], false),
            Instruct
        );
        assert_eq!(
            Tuning::detect(None, &[Some("gemma-2-2b-instruct")], false),
            Instruct
        );
        assert_eq!(
            Tuning::detect(Some("qat"), &[Some("gemma-3-4b-pt")], true),
            Base
        );
        assert_eq!(
            Tuning::detect(None, &[None, Some("codegemma-chat")], false),
            Instruct
        );
    }

    #[test]
    fn words_are_whole_words() {
        // "it" inside "Italian" or "270m" inside nothing: no word, no verdict from the name
        assert_eq!(
            Tuning::detect(None, &[Some("Italian Gemma 270m")], false),
            Base
        );
        assert_eq!(
            Tuning::detect(None, &[Some("Italian Gemma 270m")], true),
            Instruct
        );
    }

    #[test]
    fn silence_means_base_unless_a_chat_template_is_there() {
        // the default model: "Gemma 3 270m", basename "gemma-3", no finetune, no template
        assert_eq!(
            Tuning::detect(None, &[Some("Gemma 3 270m"), Some("gemma-3")], false),
            Base
        );
        assert_eq!(Tuning::detect(None, &[None, None], true), Instruct);
        assert!(Base.notice().is_some());
        assert!(Instruct.notice().is_none());
    }
}
