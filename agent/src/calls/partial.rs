//! A call cut short (`max_tokens`, the context, a cancel) read back as far as it got: the
//! tool's name and its arguments as JSON text so far. A client that forced a call gets what
//! was generated with `finish_reason: "length"`, as OpenAI's API returns a cut call, rather
//! than nothing.

use super::{CallFormat, gemma4};
use crate::tool::Tool;

/// What was decoded of a call that did not end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialCall {
    /// The tool's name: the only tool the written prefix fits, or the prefix itself when
    /// several still fit (or the name is complete).
    pub name: String,
    /// The arguments as JSON text as far as they were written; may not parse.
    pub arguments: String,
}

/// Reads the call decoded so far after the opener; `None` when not even the start of a
/// tool's name was written and more than one tool was possible.
pub fn partial_call(format: CallFormat, tools: &[Tool], body: &str) -> Option<PartialCall> {
    let (name_part, name_done, arguments) = match format {
        CallFormat::FencedJson => fenced_parts(body),
        CallFormat::Gemma4 => gemma4_parts(body),
    };
    let name = if name_done {
        name_part.to_string()
    } else {
        let fitting: Vec<&Tool> = tools
            .iter()
            .filter(|t| t.name.starts_with(name_part))
            .collect();
        match fitting.as_slice() {
            [only] => only.name.to_string(),
            _ if name_part.is_empty() => return None,
            _ => name_part.to_string(),
        }
    };
    Some(PartialCall { name, arguments })
}

/// `\n{"name": "NAME", "parameters": {…` → (name so far, whether it is complete, arguments).
fn fenced_parts(body: &str) -> (&str, bool, String) {
    const HEAD: &str = "{\"name\": \"";
    const ARGS: &str = ", \"parameters\": ";
    let body = body.trim_start_matches('\n');
    let Some(after) = prefix_rest(body, HEAD) else {
        return ("", false, String::new());
    };
    // tool names are letters, digits, `_` and `-`: no escapes to read
    match after.find('"') {
        None => (after, false, String::new()),
        Some(end) => {
            let arguments = prefix_rest(&after[end + 1..], ARGS).unwrap_or("");
            (&after[..end], true, arguments.to_string())
        }
    }
}

/// `text` after `prefix`; when `text` is itself a prefix of `prefix` (cut inside it), "".
fn prefix_rest<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    if let Some(rest) = text.strip_prefix(prefix) {
        Some(rest)
    } else if prefix.starts_with(text) {
        Some("")
    } else {
        None
    }
}

/// `call:NAME{key:<|"|>text…` → (name so far, complete, the arguments as JSON text).
fn gemma4_parts(body: &str) -> (&str, bool, String) {
    let body = body.trim_start();
    let Some(after) = prefix_rest(body, "call:") else {
        return ("", false, String::new());
    };
    match after.find('{') {
        None => (after.trim_end(), false, String::new()),
        Some(brace) => (after[..brace].trim(), true, gemma4_as_json(&after[brace..])),
    }
}

/// Gemma 4's argument syntax (bare keys, strings between quote tokens) as JSON text, for as
/// much as was written: keys quoted, string contents escaped.
fn gemma4_as_json(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    // whether the next bare word is a key: after `{` or a `,` inside an object
    let mut stack: Vec<char> = Vec::new();
    let mut expect_key = false;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(gemma4::QUOTE) {
            let (content, closed, remaining) = match after.find(gemma4::QUOTE) {
                Some(end) => (&after[..end], true, &after[end + gemma4::QUOTE.len()..]),
                None => (after, false, ""),
            };
            let quoted = serde_json::to_string(content).unwrap_or_default();
            out.push_str(if closed {
                &quoted
            } else {
                &quoted[..quoted.len() - 1]
            });
            rest = remaining;
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        match c {
            '{' => {
                stack.push('{');
                expect_key = true;
                out.push(c);
            }
            '[' => {
                stack.push('[');
                expect_key = false;
                out.push(c);
            }
            '}' | ']' => {
                stack.pop();
                expect_key = false;
                out.push(c);
            }
            ',' => {
                expect_key = stack.last() == Some(&'{');
                out.push(c);
            }
            c if expect_key && !c.is_whitespace() => {
                let end = rest.find(':').unwrap_or(rest.len());
                let key = rest[..end].trim().trim_matches('"');
                let quoted = serde_json::to_string(key).unwrap_or_default();
                if end < rest.len() {
                    out.push_str(&quoted);
                    out.push(':');
                    rest = &rest[end + 1..];
                } else {
                    out.push_str(&quoted[..quoted.len() - 1]);
                    rest = "";
                }
                expect_key = false;
                continue;
            }
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(names: &[&'static str]) -> Vec<Tool> {
        names
            .iter()
            .map(|n| Tool {
                name: (*n).into(),
                description: "".into(),
                parameters: json!({"type": "object"}),
                writes: false,
            })
            .collect()
    }

    #[test]
    fn a_fenced_call_cut_in_its_arguments_keeps_them_as_text() {
        let t = tools(&["get_weather", "get_time"]);
        let body = "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par";
        let p = partial_call(CallFormat::FencedJson, &t, body).unwrap();
        assert_eq!(p.name, "get_weather");
        assert_eq!(p.arguments, "{\"city\": \"Par");
    }

    #[test]
    fn a_name_cut_short_is_completed_only_when_one_tool_fits() {
        let t = tools(&["get_weather", "get_time", "search"]);
        let call = |body: &str| partial_call(CallFormat::FencedJson, &t, body);
        assert_eq!(call("\n{\"name\": \"se").unwrap().name, "search");
        assert_eq!(call("\n{\"name\": \"get_").unwrap().name, "get_");
        assert_eq!(call("\n{\"na"), None, "nothing chosen yet among three");
        let one = tools(&["get_weather"]);
        let p = partial_call(CallFormat::FencedJson, &one, "").unwrap();
        assert_eq!((p.name.as_str(), p.arguments.as_str()), ("get_weather", ""));
    }

    #[test]
    fn a_gemma4_call_cut_short_reads_as_json_text() {
        let t = tools(&["get_weather"]);
        let body = "call:get_weather{city:<|\"|>Pa\"ris<|\"|>,days:3,opts:{deep:true},note:<|\"|>a";
        let p = partial_call(CallFormat::Gemma4, &t, body).unwrap();
        assert_eq!(p.name, "get_weather");
        assert_eq!(
            p.arguments,
            "{\"city\":\"Pa\\\"ris\",\"days\":3,\"opts\":{\"deep\":true},\"note\":\"a"
        );
        // a complete one parses
        let done = partial_call(
            CallFormat::Gemma4,
            &t,
            "call:get_weather{city:<|\"|>Rome<|\"|>,tags:[<|\"|>x<|\"|>]}",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&done.arguments).unwrap();
        assert_eq!(v, json!({"city": "Rome", "tags": ["x"]}));
        assert_eq!(
            partial_call(CallFormat::Gemma4, &t, "call:get_w")
                .unwrap()
                .name,
            "get_weather"
        );
        assert_eq!(
            partial_call(CallFormat::Gemma4, &t, "call:get_weather{ci")
                .unwrap()
                .arguments,
            "{\"ci"
        );
    }
}
