//! The grammar of a call, in llguidance's Lark dialect (github.com/guidance-ai/llguidance,
//! `docs/syntax.md`): only the enabled tools' names, then arguments that fit that tool's JSON
//! Schema (`%json`, compiled by llguidance's JSON Schema support: types, required keys,
//! `additionalProperties: false`, enums, lengths, bounds), then the call's end. It starts
//! right after the opener ([`super::call_opener`]): the grammar is lazy, the model's free
//! text before the opener is never constrained.
//!
//! Gemma 4's arguments are not JSON (keys bare, strings between `<|"|>` tokens), so its
//! grammar is written out here from the same schema subset ([`crate::schema`]): the types,
//! required keys, enums, `const`, string lengths and item counts are in the grammar, numbers
//! have at most 16 digits (as llama.cpp's grammar bounds them); number bounds and `pattern`
//! are checked again after parsing, as every call is.
//!
//! Rules are named by position (`c_0`, `v_0_p1`), never by a tool's or a property's name:
//! tools a client of the local API declares may be called `getWeather` or `file-search`,
//! which are not Lark rule names; names appear only inside string literals.

use serde_json::{Value, json};

use super::CallFormat;
use super::fenced;
use crate::tool::Tool;

/// A Lark string literal (JSON's escapes are Lark's).
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The grammar for a call of one of `tools` in `format`, from just after the opener.
pub fn call_grammar(format: CallFormat, tools: &[Tool]) -> String {
    match format {
        CallFormat::FencedJson => fenced_grammar(tools),
        CallFormat::Gemma4 => gemma4_grammar(tools),
    }
}

fn fenced_grammar(tools: &[Tool]) -> String {
    let mut g = String::new();
    let alternatives: Vec<String> = (0..tools.len()).map(|i| format!("c_{i}")).collect();
    g.push_str(&format!(
        "start: \"\\n\" call {}\ncall: {}\n",
        lit(fenced::CLOSER),
        alternatives.join(" | ")
    ));
    for (i, tool) in tools.iter().enumerate() {
        // one spelling of the JSON, the one the declarations and the docs' example use, and
        // numbers that end (see `json.rs`)
        g.push_str(&format!(
            "c_{i}: {head} a_{i} \"}}\"\na_{i}: {rule}\n",
            head = lit(&format!("{{\"name\": \"{}\", \"parameters\": ", tool.name)),
            rule = super::json::json_rule(&tool.parameters),
        ));
    }
    g
}

const QUOTE: &str = "<|\"|>";

/// Item counts beyond this are not spelled out in Gemma 4's grammar (see `gemma4_value`).
const MAX_COUNTED_ITEMS: u64 = 64;

fn gemma4_grammar(tools: &[Tool]) -> String {
    let mut g = String::new();
    let alternatives: Vec<String> = (0..tools.len()).map(|i| format!("c_{i}")).collect();
    g.push_str(&format!(
        "start: call <tool_call|>\ncall: {}\n",
        alternatives.join(" | ")
    ));
    let mut rules = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let body = gemma4_value(&tool.parameters, &format!("v_{i}"), &mut rules);
        g.push_str(&format!(
            "c_{i}: {} {}\n",
            lit(&format!("call:{}", tool.name)),
            body
        ));
    }
    for r in rules {
        g.push_str(&r);
        g.push('\n');
    }
    g
}

/// The Lark expression for a value of `schema` in Gemma 4's syntax; helper rules go to
/// `rules`, named from `at`.
fn gemma4_value(schema: &Value, at: &str, rules: &mut Vec<String>) -> String {
    if let Some(constant) = schema.get("const") {
        return gemma4_literal(constant);
    }
    if let Some(Value::Array(options)) = schema.get("enum") {
        let alts: Vec<String> = options.iter().map(gemma4_literal).collect();
        return format!("({})", alts.join(" | "));
    }
    match schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
    {
        "object" => gemma4_object(schema, at, rules),
        "array" => {
            let item = gemma4_value(
                schema.get("items").unwrap_or(&json!({})),
                &format!("{at}_i"),
                rules,
            );
            // another program's schema may ask for any count: a call must still be able to
            // end, and the grammar stay small (the server checks the count again)
            let min = schema
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(MAX_COUNTED_ITEMS);
            let max = schema
                .get("maxItems")
                .and_then(Value::as_u64)
                .filter(|m| *m <= MAX_COUNTED_ITEMS);
            gemma4_array(&item, at, min, max, rules)
        }
        "boolean" => "(\"true\" | \"false\")".into(),
        "integer" => "/-?(0|[1-9][0-9]{0,15})/".into(),
        "number" => "/-?(0|[1-9][0-9]{0,15})(\\.[0-9]{1,16})?/".into(),
        "null" => "\"null\"".into(),
        _ => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
            let max = schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .unwrap_or(4096);
            // any text but the quote token, which data can never be tokenized into
            format!("{QUOTE} /(?s:.){{{min},{max}}}/ {QUOTE}")
        }
    }
}

/// `[item,…]` with `min` to `max` items (`minItems`, `maxItems`).
fn gemma4_array(
    item: &str,
    at: &str,
    min: u64,
    max: Option<u64>,
    rules: &mut Vec<String>,
) -> String {
    if max == Some(0) {
        return "\"[\" \"]\"".into();
    }
    // the items after the first: at least min - 1, at most max - 1
    let low = min.saturating_sub(1);
    let rest = match max.map(|m| m - 1) {
        Some(0) => String::new(),
        Some(high) => format!(" (\",\" {item}){{{low},{}}}", high.max(low)),
        None if low == 0 => format!(" (\",\" {item})*"),
        None => format!(" (\",\" {item}){{{low},}}"),
    };
    rules.push(format!("{at}_items: {item}{rest}"));
    if min == 0 {
        format!("\"[\" {at}_items? \"]\"")
    } else {
        format!("\"[\" {at}_items \"]\"")
    }
}

fn gemma4_literal(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{QUOTE} {} {QUOTE}", lit(s)),
        other => lit(&other.to_string()),
    }
}

/// `{k:v,…}` with the properties in schema order, the required ones always present and the
/// others optional: rule `{at}_f{i}` is "from property i on, nothing written yet", `{at}_t{i}`
/// "from property i on, after something" (so it starts with a comma).
fn gemma4_object(schema: &Value, at: &str, rules: &mut Vec<String>) -> String {
    let empty = serde_json::Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let n = props.len();
    for (i, (key, sub)) in props.iter().enumerate() {
        let value = gemma4_value(sub, &format!("{at}_p{i}"), rules);
        let pair = format!("{} {value}", lit(&format!("{key}:")));
        let (f_next, t_next) = if i + 1 == n {
            (String::new(), String::new())
        } else {
            (format!("{at}_f{}", i + 1), format!("{at}_t{}", i + 1))
        };
        if required.contains(&key.as_str()) {
            rules.push(format!("{at}_f{i}: {pair} {t_next}"));
            rules.push(format!("{at}_t{i}: \",\" {pair} {t_next}"));
        } else {
            let skip_f = if f_next.is_empty() {
                "\"\"".to_string()
            } else {
                f_next
            };
            let skip_t = if t_next.is_empty() {
                "\"\"".to_string()
            } else {
                t_next.clone()
            };
            rules.push(format!("{at}_f{i}: {pair} {t_next} | {skip_f}"));
            rules.push(format!("{at}_t{i}: \",\" {pair} {t_next} | {skip_t}"));
        }
    }
    if n == 0 {
        "\"{}\"".into()
    } else {
        format!("\"{{\" {at}_f0 \"}}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;

    #[test]
    fn the_fenced_grammar_names_every_tool_and_embeds_its_schema() {
        let tools = crate::tools::declarations(&Limits::default());
        let g = call_grammar(CallFormat::FencedJson, &tools);
        for t in &tools {
            assert!(
                g.contains(&format!("\\\"name\\\": \\\"{}\\\"", t.name)),
                "{g}"
            );
        }
        assert!(g.starts_with("start: \"\\n\" call \"\\n```\""), "{g}");
        assert_eq!(g.matches("%json").count(), tools.len());
    }

    #[test]
    fn gemma4_arrays_count_their_items_and_constants_are_literal() {
        let mut rules = Vec::new();
        let array = |min: u64, max: Option<u64>, rules: &mut Vec<String>| {
            rules.clear();
            let top = gemma4_array("I", "a", min, max, rules);
            (top, rules.first().cloned().unwrap_or_default())
        };
        assert_eq!(
            array(0, None, &mut rules),
            (
                "\"[\" a_items? \"]\"".into(),
                "a_items: I (\",\" I)*".into()
            )
        );
        assert_eq!(
            array(2, Some(3), &mut rules),
            (
                "\"[\" a_items \"]\"".into(),
                "a_items: I (\",\" I){1,2}".into()
            )
        );
        assert_eq!(array(1, Some(1), &mut rules).1, "a_items: I");
        assert_eq!(array(3, None, &mut rules).1, "a_items: I (\",\" I){2,}");
        assert_eq!(array(0, Some(0), &mut rules).0, "\"[\" \"]\"");
        let c = gemma4_value(&json!({"type": "string", "const": "x"}), "v", &mut rules);
        assert_eq!(c, "<|\"|> \"x\" <|\"|>");
    }

    #[test]
    fn gemma4_objects_keep_required_keys_and_may_skip_the_others() {
        // offset before path: the order of the schema as written and, without serde_json's
        // preserve_order, of its sorted keys
        let schema = json!({"type": "object", "properties": {
            "offset": {"type": "integer"},
            "path": {"type": "string", "maxLength": 5}
        }, "required": ["path"]});
        let mut rules = Vec::new();
        let top = gemma4_value(&schema, "v", &mut rules);
        assert_eq!(top, "\"{\" v_f0 \"}\"");
        let rule = |name: &str| {
            rules
                .iter()
                .find(|r| r.starts_with(&format!("{name}: ")))
                .cloned()
                .unwrap_or_default()
        };
        assert!(
            rule("v_f0").starts_with("v_f0: \"offset:\" /-?"),
            "{rules:?}"
        );
        assert!(
            rule("v_f0").ends_with("v_t1 | v_f1"),
            "offset may be skipped: {rules:?}"
        );
        let path = "\"path:\" <|\"|> /(?s:.){0,5}/ <|\"|>";
        assert_eq!(
            rule("v_f1").trim_end(),
            format!("v_f1: {path}"),
            "path is required"
        );
        assert_eq!(rule("v_t1").trim_end(), format!("v_t1: \",\" {path}"));
    }
}
