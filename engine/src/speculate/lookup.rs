//! Drafts by prompt lookup: find the longest recent n-gram of the session's tokens that ends
//! like the tokens so far, and propose what followed it (Saxena, "Prompt Lookup Decoding",
//! 2023; llama.cpp `common/ngram-cache`). How long, and when it rests: `control`.

use super::control::DraftControl;

/// The longest and shortest n-gram matched.
const MAX_NGRAM: usize = 4;
const MIN_NGRAM: usize = 2;
/// How far back a match is looked for.
const SEARCH_WINDOW: usize = 16_384;

#[derive(Debug, Clone, Default)]
pub struct PromptLookup {
    pub control: DraftControl,
}

impl PromptLookup {
    /// A lookup that rests only for refused drafts, never for what its checks cost.
    pub fn untimed() -> Self {
        PromptLookup {
            control: DraftControl::untimed(),
        }
    }

    /// A draft to follow `tokens` (the prompt and what was generated, the last token
    /// included), at most `room` long; empty when nothing matches or the lookup rests.
    pub fn draft(&mut self, tokens: &[u32], room: usize) -> Vec<u32> {
        match self.control.next_length(room) {
            0 => Vec::new(),
            length => find(tokens, length),
        }
    }
}

/// The continuation (up to `length` tokens) of the most recent earlier occurrence of the
/// longest suffix of `tokens` (from [`MAX_NGRAM`] down to [`MIN_NGRAM`] tokens).
pub fn find(tokens: &[u32], length: usize) -> Vec<u32> {
    let n_tokens = tokens.len();
    let start = n_tokens.saturating_sub(SEARCH_WINDOW);
    for n in (MIN_NGRAM..=MAX_NGRAM).rev() {
        if n_tokens <= n {
            continue;
        }
        let suffix = &tokens[n_tokens - n..];
        // occurrences ending before the suffix itself, most recent first
        let mut i = n_tokens - n;
        while i > start {
            i -= 1;
            if tokens[i..i + n] == *suffix {
                let from = i + n;
                let to = (from + length).min(n_tokens);
                if to > from {
                    return tokens[from..to].to_vec();
                }
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_most_recent_match_is_continued() {
        // "1 2 3 9 ... 1 2 3" → 9 follows; the later "2 3 7" is a shorter match
        let tokens = [1, 2, 3, 9, 8, 2, 3, 7, 5, 1, 2, 3];
        assert_eq!(find(&tokens, 3), vec![9, 8, 2]);
        // only a bigram matches: its most recent occurrence
        let tokens = [5, 6, 1, 5, 6, 2, 0, 5, 6];
        assert_eq!(find(&tokens, 2), vec![2, 0]);
        assert!(find(&[1, 2, 3, 4], 4).is_empty());
        assert!(find(&[], 4).is_empty());
    }
}
