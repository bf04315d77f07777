//! JSON that always closes: the `%json` rule of a schema for llguidance, written one way and
//! with every number bounded, so that a model cannot fill its budget with digits.
//!
//! llguidance compiles an unbounded `{"type": "integer"}` to `-?(0|[1-9][0-9]*)`: a small
//! model that starts `35000…` may never stop (seen with the default model: 4 of 5 replies to
//! a schema with an integer field ran to `max_tokens`). llama.cpp's JSON-schema conversion
//! (`common/json-schema-to-grammar.cpp`, `integral-part ::= [0] | [1-9] [0-9]{0,15}`,
//! `decimal-part ::= [0-9]{1,16}`) bounds digits for this reason. The same is done here by
//! adding bounds to the schema, which llguidance turns into finite regexes:
//! - an integer without a minimum or maximum gets ±(10^16 - 1): at most 16 digits, llama.cpp's
//!   language exactly;
//! - a number gets exclusive bounds ±10^16 (at most 16 digits before the point) and, unless
//!   the schema has its own `multipleOf`, `multipleOf: 1e-9`: at most 9 digits after the
//!   point, no exponent. llama.cpp allows 16 decimals and an exponent; llguidance's
//!   `multipleOf` arithmetic is 32-bit (`derivre`'s `RemainderIs`), so 9 is its limit.
//! - an object schema with `properties` and no `additionalProperties` admits no other keys, as
//!   in llama.cpp (`common/json-schema.cpp`: additional properties only when the schema says
//!   so, or has no `properties`); llguidance follows the letter of JSON Schema and would let
//!   a model add keys until `max_tokens` (seen: `"school"`, `"occupation"`, `"phone"`, …);
//! - "any JSON" (the `json_object` format, a schema of `true`) is spelled out as a recursive
//!   schema whose numbers are bounded the same way.
//!
//! Bounds a schema states itself are kept. `maxLength`, `maxItems`, `enum`, `const` and
//! `pattern` are llguidance's own.

use serde_json::{Map, Value, json};

/// The largest integer with 16 digits.
const INTEGER_LIMIT: i64 = 9_999_999_999_999_999;
/// Numbers stay below this in magnitude (16 digits before the point).
const NUMBER_LIMIT: f64 = 1e16;
/// The finest step of a number: 9 digits after the point (see the module's comment).
const NUMBER_STEP: f64 = 1e-9;

/// JSON written one way (`", "` and `": "`, no free whitespace): a small model given free
/// whitespace can fill its whole budget with newlines. A schema's own `x-guidance` wins.
fn guidance() -> Value {
    json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "})
}

/// The Lark rule body `%json {…}` for values of `schema`, bounded and written one way.
pub fn json_rule(schema: &Value) -> String {
    let mut schema = bounded(schema);
    if let Some(map) = schema.as_object_mut() {
        map.entry("x-guidance").or_insert_with(guidance);
    }
    format!("%json {schema}")
}

/// Any JSON object, its values bounded as [`bounded`] bounds a schema's.
pub fn any_object_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": {"$ref": "#/$defs/any"},
        "$defs": {"any": any_value()},
    })
}

fn any_value() -> Value {
    let mut integer = json!({"type": "integer"});
    let mut number = json!({"type": "number"});
    bound_number(integer.as_object_mut().expect("an object"), true);
    bound_number(number.as_object_mut().expect("an object"), false);
    json!({"anyOf": [
        {"type": "string"},
        integer,
        number,
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": "#/$defs/any"}},
        {"type": "object", "additionalProperties": {"$ref": "#/$defs/any"}},
    ]})
}

/// `schema` with bounds on every integer and number it declares (see the module's comment).
pub fn bounded(schema: &Value) -> Value {
    let mut schema = match schema {
        // `true` admits any value
        Value::Bool(true) => return any_value(),
        other => other.clone(),
    };
    bound_in_place(&mut schema);
    schema
}

/// Keywords whose values are data, not schemas: never rewritten.
const DATA_KEYWORDS: [&str; 5] = ["enum", "const", "default", "examples", "x-guidance"];

/// Keywords whose values map names to schemas: the names are not keywords.
const NAMED_SCHEMAS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

fn bound_in_place(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let types = declared_types(map);
            if types.iter().any(|t| t == "integer") && !types.iter().any(|t| t == "number") {
                bound_number(map, true);
            } else if types.iter().any(|t| t == "number") {
                bound_number(map, false);
            }
            if map.contains_key("properties")
                && !map.contains_key("additionalProperties")
                && !map.contains_key("patternProperties")
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (key, sub) in map.iter_mut() {
                if NAMED_SCHEMAS.contains(&key.as_str()) {
                    if let Value::Object(named) = sub {
                        named.values_mut().for_each(bound_in_place);
                    }
                } else if !DATA_KEYWORDS.contains(&key.as_str()) {
                    bound_in_place(sub);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(bound_in_place),
        _ => {}
    }
}

fn declared_types(map: &Map<String, Value>) -> Vec<String> {
    match map.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

fn bound_number(map: &mut Map<String, Value>, integer: bool) {
    let has = |map: &Map<String, Value>, keys: [&str; 2]| keys.iter().any(|k| map.contains_key(*k));
    if integer {
        if !has(map, ["minimum", "exclusiveMinimum"]) {
            map.insert("minimum".into(), json!(-INTEGER_LIMIT));
        }
        if !has(map, ["maximum", "exclusiveMaximum"]) {
            map.insert("maximum".into(), json!(INTEGER_LIMIT));
        }
        return;
    }
    if !has(map, ["minimum", "exclusiveMinimum"]) {
        map.insert("exclusiveMinimum".into(), json!(-NUMBER_LIMIT));
    }
    if !has(map, ["maximum", "exclusiveMaximum"]) {
        map.insert("exclusiveMaximum".into(), json!(NUMBER_LIMIT));
    }
    map.entry("multipleOf").or_insert(json!(NUMBER_STEP));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_numbers_get_bounds_where_the_schema_has_none() {
        let s = bounded(&json!({"type": "object", "properties": {
            "age": {"type": "integer"},
            "score": {"type": "number", "minimum": 0},
            "step": {"type": "number", "multipleOf": 0.5},
            "tags": {"type": "array", "items": {"type": ["integer", "null"]}},
            "level": {"type": "integer", "enum": [1, 2]},
            "name": {"type": "string"},
        }}));
        let p = &s["properties"];
        assert_eq!(p["age"]["minimum"], json!(-INTEGER_LIMIT));
        assert_eq!(p["age"]["maximum"], json!(INTEGER_LIMIT));
        assert_eq!(p["score"]["minimum"], json!(0), "a stated bound is kept");
        assert!(p["score"].get("exclusiveMinimum").is_none());
        assert_eq!(p["score"]["exclusiveMaximum"], json!(NUMBER_LIMIT));
        assert_eq!(p["score"]["multipleOf"], json!(NUMBER_STEP));
        assert_eq!(p["step"]["multipleOf"], json!(0.5), "its own step is kept");
        assert_eq!(p["tags"]["items"]["maximum"], json!(INTEGER_LIMIT));
        assert_eq!(p["level"]["enum"], json!([1, 2]));
        assert_eq!(p["name"], json!({"type": "string"}));
        assert_eq!(
            s["additionalProperties"],
            json!(false),
            "as llama.cpp reads it"
        );
        let open =
            bounded(&json!({"type": "object", "properties": {}, "additionalProperties": true}));
        assert_eq!(
            open["additionalProperties"],
            json!(true),
            "a stated choice is kept"
        );
        assert!(
            bounded(&json!({"type": "object"}))
                .get("additionalProperties")
                .is_none()
        );
    }

    #[test]
    fn a_property_named_like_a_keyword_is_not_mistaken_for_one() {
        let s = bounded(&json!({"type": "object", "properties": {
            "type": {"type": "string"},
            "const": {"type": "integer"},
        }, "enum": [{"type": "integer"}]}));
        assert_eq!(s["properties"]["type"], json!({"type": "string"}));
        assert_eq!(s["properties"]["const"]["maximum"], json!(INTEGER_LIMIT));
        assert_eq!(
            s["enum"],
            json!([{"type": "integer"}]),
            "data is not a schema"
        );
    }

    #[test]
    fn the_rule_is_written_one_way_unless_the_schema_says_otherwise() {
        let rule = json_rule(&json!({"type": "object"}));
        assert!(rule.starts_with("%json {"), "{rule}");
        assert!(rule.contains("\"whitespace_flexible\":false"), "{rule}");
        let own = json_rule(&json!({"type": "array", "x-guidance": {"whitespace_flexible": true}}));
        assert!(own.contains("\"whitespace_flexible\":true"), "{own}");
    }

    #[test]
    fn any_json_bounds_its_numbers() {
        let any = any_object_schema();
        let text = any.to_string();
        assert!(text.contains(&INTEGER_LIMIT.to_string()), "{text}");
        assert!(text.contains("multipleOf"), "{text}");
        assert_eq!(
            bounded(&json!(true))["anyOf"][1]["maximum"],
            json!(INTEGER_LIMIT)
        );
    }
}
