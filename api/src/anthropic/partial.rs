//! A cut call's arguments (JSON text that stops mid-way) as the object Anthropic's whole
//! `tool_use` block needs: as far as they parse, open strings and containers closed, the last
//! incomplete member dropped — what the `anthropic` client's own accumulator makes of the
//! same text in a stream (it reads partial JSON). A stream sends the text itself.

use serde_json::{Map, Value};

/// How many cut points are tried, from the end, before giving up on the text: each try is one
/// pass over it, and a partial call is at most `max_tokens` long.
const TRIES: usize = 16;

/// `text` closed: an open string ended (a dangling escape dropped), a trailing `,` dropped,
/// the open arrays and objects closed in order. `None` when it is not the start of a JSON
/// object.
fn closed(text: &str) -> Option<String> {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop()?;
            }
            _ => {}
        }
    }
    let mut out = text.to_string();
    if in_string {
        if escaped {
            out.pop();
        }
        // an escape cut inside its hex digits cannot be closed; the caller cuts earlier
        out.push('"');
    }
    let trimmed = out.trim_end().trim_end_matches(',').len();
    out.truncate(trimmed);
    while let Some(close) = stack.pop() {
        out.push(close);
    }
    Some(out)
}

/// The object `text` begins, as far as it parses; `{}` when nothing of it does.
pub fn object_so_far(text: &str) -> Value {
    let text = text.trim_start();
    // the whole text first, then cut before each of the last separators: the member being
    // written when the call was cut may be a key without its value
    let cuts = std::iter::once(text.len()).chain(
        text.char_indices()
            .rev()
            .filter(|&(_, c)| c == ',')
            .map(|(i, _)| i),
    );
    for cut in cuts.take(TRIES) {
        if let Some(Ok(Value::Object(map))) =
            closed(&text[..cut]).map(|t| serde_json::from_str::<Value>(&t))
        {
            return Value::Object(map);
        }
    }
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cut_object_keeps_what_was_whole() {
        for (text, want) in [
            (r#"{"city": "Oslo"}"#, json!({"city": "Oslo"})),
            (r#"{"city": "Pa"#, json!({"city": "Pa"})),
            (r#"{"city": "Paris", "cou"#, json!({"city": "Paris"})),
            (r#"{"city": "Paris", "country":"#, json!({"city": "Paris"})),
            (
                r#"{"n": 12, "tags": ["a", "b"#,
                json!({"n": 12, "tags": ["a", "b"]}),
            ),
            (
                r#"{"q": "say \"hi\"", "r": "x\"#,
                json!({"q": "say \"hi\"", "r": "x"}),
            ),
            (r#"{"n": 12, "m": tr"#, json!({"n": 12})),
            (r#"{"a": {"b": [1, 2,"#, json!({"a": {"b": [1, 2]}})),
            ("{", json!({})),
            ("", json!({})),
            ("[1, 2", json!({})),
            ("}}}", json!({})),
            (r#"{"s": "\u00"#, json!({})),
        ] {
            assert_eq!(object_so_far(text), want, "{text}");
        }
    }
}
