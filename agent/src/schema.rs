//! Checking a tool call's arguments against the tool's JSON Schema before it runs.
//!
//! The schemas are ours and use a small subset of JSON Schema draft 2020-12 — `type`
//! (`object`, `string`, `integer`, `number`, `boolean`, `array`), `properties`, `required`,
//! `additionalProperties: false`, `enum`, `const`, `minimum`, `maximum`, `minLength`,
//! `maxLength`, `items`, `minItems`, `maxItems`, and the annotations `description` and
//! `default` — the subset that
//! grammar engines such as llguidance turn into token masks. A full validator (the
//! `jsonschema` crate) would bring some sixty crates (arbitrary-precision numbers, URI
//! references, e-mail and UUID formats) for these dozen keywords, so this module checks
//! exactly them, with errors that name the argument; [`check_subset`] refuses any other
//! keyword, so a schema can never say more than is checked. Semantics follow the
//! specification: `integer` is a number with no fractional part, lengths count Unicode code
//! points, `enum` compares JSON values.

use serde_json::{Map, Value};

/// The keywords [`validate`] understands.
const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "items",
    "minItems",
    "maxItems",
    "description",
    "default",
];

/// Refuse a schema that uses anything outside the subset (or `additionalProperties` other
/// than `false`): what a schema says must be what is checked.
pub fn check_subset(schema: &Value) -> Result<(), String> {
    check_subset_at(schema, "")
}

fn check_subset_at(schema: &Value, at: &str) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err(format!("schema at `{at}` is not an object"));
    };
    for (key, value) in map {
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(format!(
                "schema at `{at}` uses `{key}`, which is not checked"
            ));
        }
        match key.as_str() {
            "additionalProperties" if value != &Value::Bool(false) => {
                return Err(format!(
                    "schema at `{at}`: only `additionalProperties: false` is checked"
                ));
            }
            "properties" => {
                let Value::Object(props) = value else {
                    return Err(format!("schema at `{at}`: `properties` is not an object"));
                };
                for (name, sub) in props {
                    check_subset_at(sub, &format!("{at}/{name}"))?;
                }
            }
            "items" => check_subset_at(value, &format!("{at}/items"))?,
            _ => {}
        }
    }
    Ok(())
}

/// Check `value` against `schema`: `Err` says which argument is wrong and how, e.g.
/// ``argument `offset` must be at least 0, not -4``.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    validate_at(schema, value, None)
}

fn validate_at(schema: &Value, value: &Value, at: Option<&str>) -> Result<(), String> {
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    let what = || match at {
        Some(name) => format!("argument `{name}`"),
        None => "the arguments".to_string(),
    };
    if let Some(Value::String(ty)) = schema.get("type")
        && !has_type(value, ty)
    {
        return Err(format!(
            "{} must be {}, not {}",
            what(),
            type_phrase(ty),
            describe(value)
        ));
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(format!(
            "{} must be one of {}, not {}",
            what(),
            list.join(", "),
            describe(value)
        ));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!(
            "{} must be {constant}, not {}",
            what(),
            describe(value)
        ));
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                return Err(format!("{} must be at least {min}, not {n}", what()));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                return Err(format!("{} must be at most {max}, not {n}", what()));
            }
        }
        Value::String(s) => {
            let chars = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                return Err(if min == 1 {
                    format!("{} must not be empty", what())
                } else {
                    format!("{} must have at least {min} characters", what())
                });
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                return Err(format!(
                    "{} must have at most {max} characters, not {chars}",
                    what()
                ));
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (items.len() as u64) < min
            {
                return Err(format!("{} must have at least {min} items", what()));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                return Err(format!("{} must have at most {max} items", what()));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    let name = format!("{}[{i}]", at.unwrap_or("arguments"));
                    validate_at(item_schema, item, Some(&name))?;
                }
            }
        }
        Value::Object(map) => validate_object(schema, map, at)?,
        _ => {}
    }
    Ok(())
}

fn validate_object(
    schema: &Map<String, Value>,
    map: &Map<String, Value>,
    at: Option<&str>,
) -> Result<(), String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let name_of = |key: &str| match at {
        Some(parent) => format!("{parent}.{key}"),
        None => key.to_string(),
    };
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                return Err(format!("argument `{}` is required", name_of(key)));
            }
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let mut unknown: Vec<&str> = map
            .keys()
            .filter(|k| !properties.contains_key(*k))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
            known.sort_unstable();
            let takes = if known.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!("it takes {}", known.join(", "))
            };
            return Err(format!(
                "unknown argument `{}` ({takes})",
                unknown.join("`, `")
            ));
        }
    }
    for (key, sub) in properties {
        if let Some(v) = map.get(key) {
            validate_at(sub, v, Some(&name_of(key)))?;
        }
    }
    Ok(())
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        // 2020-12: any number with a zero fractional part, so 3.0 is an integer
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => true,
    }
}

fn type_phrase(ty: &str) -> &'static str {
    match ty {
        "object" => "an object",
        "array" => "a list",
        "string" => "a string",
        "boolean" => "true or false",
        "null" => "null",
        "number" => "a number",
        "integer" => "a whole number",
        _ => "of another type",
    }
}

/// A short picture of a value for an error message: never all of a long string.
fn describe(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > 40 => {
            let head: String = s.chars().take(40).collect();
            format!("\"{head}…\"")
        }
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
        other => other.to_string(),
    }
}

/// Read an integer argument already validated as one (so 3.0 reads as 3).
pub(crate) fn as_integer(value: Option<&Value>) -> Option<i64> {
    let n = value?.as_number()?;
    n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 8},
                "offset": {"type": "integer", "minimum": 0},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(validate(&schema(), &json!({"path": "x"})), Ok(()));
        let all = json!({"path": "日本語", "offset": 3.0, "mode": "b", "tags": ["t"]});
        assert_eq!(validate(&schema(), &all), Ok(()));
    }

    #[test]
    fn each_error_names_the_argument() {
        let cases = [
            (json!({}), "argument `path` is required"),
            (json!([]), "the arguments must be an object, not a list"),
            (
                json!({"path": 3}),
                "argument `path` must be a string, not 3",
            ),
            (json!({"path": ""}), "argument `path` must not be empty"),
            (
                json!({"path": "123456789"}),
                "argument `path` must have at most 8 characters, not 9",
            ),
            (
                json!({"path": "x", "offset": -1}),
                "argument `offset` must be at least 0, not -1",
            ),
            (
                json!({"path": "x", "offset": 1.5}),
                "argument `offset` must be a whole number, not 1.5",
            ),
            (
                json!({"path": "x", "mode": "c"}),
                "argument `mode` must be one of \"a\", \"b\", not \"c\"",
            ),
            (
                json!({"path": "x", "tags": [1]}),
                "argument `tags[0]` must be a string, not 1",
            ),
            (
                json!({"path": "x", "tags": ["a", "b", "c"]}),
                "argument `tags` must have at most 2 items",
            ),
            (
                json!({"path": "x", "colour": 1}),
                "unknown argument `colour` (it takes mode, offset, path, tags)",
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(
                validate(&schema(), &value),
                Err(expected.to_string()),
                "{value}"
            );
        }
    }

    #[test]
    fn lengths_count_characters_not_bytes() {
        let s = json!({"type": "string", "maxLength": 2});
        assert!(validate(&s, &json!("日本")).is_ok());
        assert!(validate(&s, &json!("日本語")).is_err());
    }

    #[test]
    fn only_the_checked_subset_may_be_used() {
        assert_eq!(check_subset(&schema()), Ok(()));
        let pattern =
            json!({"type": "object", "properties": {"p": {"type": "string", "pattern": "x"}}});
        assert!(check_subset(&pattern).unwrap_err().contains("`pattern`"));
        let counted = json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"const": 1}});
        assert_eq!(check_subset(&counted), Ok(()));
        assert!(validate(&counted, &json!([1])).is_ok());
        assert!(
            validate(&counted, &json!([]))
                .unwrap_err()
                .contains("at least 1 items")
        );
        assert!(
            validate(&counted, &json!([2]))
                .unwrap_err()
                .contains("must be 1, not")
        );
        let open = json!({"type": "object", "additionalProperties": true});
        assert!(check_subset(&open).is_err());
    }
}
