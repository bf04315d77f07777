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
//!   language exactly; with one side stated, the other is put at most 10^16 - 1 beyond it;
//! - a number gets exclusive bounds ±10^16 the same way (16 digits before the point) and,
//!   unless the schema has its own `multipleOf`, `multipleOf: 1e-9`: at most 9 digits after
//!   the point, no exponent. llama.cpp allows 16 decimals and an exponent; llguidance's
//!   `multipleOf` arithmetic is 32-bit (`derivre`'s `RemainderIs`), so 9 is its limit. A value
//!   listed by `enum` or `const` is left as it is;
//! - an object schema with `properties` and no `additionalProperties` admits no other keys, as
//!   in llama.cpp (`common/json-schema.cpp`: additional properties only when the schema says
//!   so, or has no `properties`); llguidance follows the letter of JSON Schema and would let
//!   a model add keys until `max_tokens` (seen: `"school"`, `"occupation"`, `"phone"`, …).
//!   Not where other keywords decide the keys (`allOf` members, which are merged, `$ref`,
//!   `anyOf`/`oneOf` beside them, `unevaluatedProperties`);
//! - "any value" (`true`, `{}`, a schema of annotations only, and the `json_object` format) is
//!   spelled out as a recursive schema with the same bounds (`$defs/companion_any`);
//! - schemas that are tested rather than produced (`not`, `if`, `contains`) are left alone.
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

/// Where the bounded "any value" schema lives in a rewritten schema.
const ANY: &str = "companion_any";
const ANY_REF: &str = "#/$defs/companion_any";

/// Any JSON object, its values bounded as [`bounded`] bounds a schema's.
pub fn any_object_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": {"$ref": ANY_REF},
        "$defs": {ANY: any_value()},
    })
}

/// Any JSON value with bounded numbers; refers to itself at [`ANY_REF`].
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
        {"type": "array", "items": {"$ref": ANY_REF}},
        {"type": "object", "additionalProperties": {"$ref": ANY_REF}},
    ]})
}

/// `schema` with bounds on every integer and number it declares, and every place that admits
/// any value (`true`, `{}`) admitting bounded values (see the module's comment).
pub fn bounded(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if is_any(&schema) {
        return json!({"$ref": ANY_REF, "$defs": {ANY: any_value()}});
    }
    let mut used_any = false;
    bound_in_place(&mut schema, false, &mut used_any);
    if used_any && let Some(map) = schema.as_object_mut() {
        let defs = map.entry("$defs").or_insert_with(|| json!({}));
        if let Some(defs) = defs.as_object_mut() {
            defs.insert(ANY.into(), any_value());
        }
    }
    schema
}

/// Keywords whose values are data, not schemas: never rewritten.
const DATA_KEYWORDS: [&str; 7] = [
    "enum",
    "const",
    "default",
    "examples",
    "x-guidance",
    "required",
    "dependentRequired",
];

/// Keywords whose values map names to schemas: the names are not keywords.
const NAMED_SCHEMAS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Keywords that say no more than what a value is about: a schema with only these admits any
/// value.
const ANNOTATIONS: [&str; 7] = [
    "description",
    "title",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
];

/// Beside these, an object's other keys are decided elsewhere: it is not closed here.
const COMBINED: [&str; 9] = [
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "not",
    "if",
    "unevaluatedProperties",
    "patternProperties",
    "additionalProperties",
];

/// Schemas that are tested rather than produced: rewriting them would change which values
/// match (a closed `if` object would send every call to `else`).
const CONDITIONS: [&str; 3] = ["not", "if", "contains"];

/// `true`, `{}`, or a schema of annotations only.
fn is_any(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(map) => map.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
        _ => false,
    }
}

/// Rewrites the schema `value` in place. `in_all_of`: it is a member of an `allOf`, merged
/// with the others (closing it would refuse their properties).
fn bound_in_place(value: &mut Value, in_all_of: bool, used_any: &mut bool) {
    let Value::Object(map) = value else {
        return;
    };
    let types = declared_types(map);
    let data = map.contains_key("enum") || map.contains_key("const");
    if !data {
        if types.iter().any(|t| t == "integer") && !types.iter().any(|t| t == "number") {
            bound_number(map, true);
        } else if types.iter().any(|t| t == "number") {
            bound_number(map, false);
        }
    }
    if map.contains_key("properties")
        && !in_all_of
        && !COMBINED.iter().any(|k| map.contains_key(*k))
    {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (key, sub) in map.iter_mut() {
        let key = key.as_str();
        if DATA_KEYWORDS.contains(&key) || ANNOTATIONS.contains(&key) {
            continue;
        }
        if NAMED_SCHEMAS.contains(&key) {
            if let Value::Object(named) = sub {
                for schema in named.values_mut() {
                    bound_schema(schema, false, used_any);
                }
            }
        } else if let Value::Array(items) = sub {
            // allOf, anyOf, oneOf, prefixItems
            for schema in items {
                bound_schema(schema, key == "allOf", used_any);
            }
        } else if !CONDITIONS.contains(&key) {
            // items, additionalProperties, propertyNames, then, else, …
            bound_schema(sub, false, used_any);
        }
    }
}

/// A schema in a place that takes one: "any value" becomes the bounded one.
fn bound_schema(schema: &mut Value, in_all_of: bool, used_any: &mut bool) {
    if is_any(schema) && !in_all_of {
        *schema = json!({"$ref": ANY_REF});
        *used_any = true;
    } else {
        bound_in_place(schema, in_all_of, used_any);
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

/// The bound a schema states on one side, inclusive or not.
fn stated(map: &Map<String, Value>, inclusive: &str, exclusive: &str) -> Option<f64> {
    map.get(inclusive)
        .or_else(|| map.get(exclusive))
        .and_then(Value::as_f64)
}

/// Adds what bounds a number's digits: a missing side goes at most [`INTEGER_LIMIT`]
/// (numbers: [`NUMBER_LIMIT`]) beyond the stated side, or beyond zero when neither is
/// stated, so a stated bound is never contradicted.
fn bound_number(map: &mut Map<String, Value>, integer: bool) {
    let low = stated(map, "minimum", "exclusiveMinimum");
    let high = stated(map, "maximum", "exclusiveMaximum");
    if integer {
        // in integers: f64 cannot hold 9999999999999999
        let limit = i128::from(INTEGER_LIMIT);
        let clamp = |x: i128| x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        if low.is_none() {
            let from = high.map_or(0, |h| h.floor() as i128).min(0);
            map.insert("minimum".into(), json!(clamp(from - limit)));
        }
        if high.is_none() {
            let from = low.map_or(0, |l| l.ceil() as i128).max(0);
            map.insert("maximum".into(), json!(clamp(from + limit)));
        }
        return;
    }
    if low.is_none() {
        let from = high.unwrap_or(0.0).min(0.0);
        map.insert("exclusiveMinimum".into(), json!(from - NUMBER_LIMIT));
    }
    if high.is_none() {
        let from = low.unwrap_or(0.0).max(0.0);
        map.insert("exclusiveMaximum".into(), json!(from + NUMBER_LIMIT));
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
            json!({"$ref": ANY_REF}),
            "a stated choice is kept: other keys, any (bounded) values"
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
        let root = bounded(&json!(true));
        assert_eq!(root["$ref"], ANY_REF);
        assert_eq!(
            root["$defs"][ANY]["anyOf"][1]["maximum"],
            json!(INTEGER_LIMIT)
        );
    }

    #[test]
    fn any_value_inside_a_schema_becomes_the_bounded_one() {
        let s = bounded(&json!({"type": "object", "properties": {
            "value": {}, "note": {"description": "anything"}, "list": {"type": "array", "items": true}
        }}));
        assert_eq!(s["properties"]["value"], json!({"$ref": ANY_REF}));
        assert_eq!(s["properties"]["note"], json!({"$ref": ANY_REF}));
        assert_eq!(s["properties"]["list"]["items"], json!({"$ref": ANY_REF}));
        assert!(s["$defs"][ANY]["anyOf"].is_array());
        assert!(bounded(&json!({"type": "string"})).get("$defs").is_none());
    }

    #[test]
    fn merged_and_referenced_objects_are_not_closed() {
        let s = bounded(&json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
        ]}));
        for member in s["allOf"].as_array().unwrap() {
            assert!(member.get("additionalProperties").is_none(), "{member}");
        }
        let with_ref =
            bounded(&json!({"$ref": "#/$defs/base", "properties": {"c": {"type": "string"}}}));
        assert!(with_ref.get("additionalProperties").is_none());
        let branches = bounded(&json!({"anyOf": [{"type": "object", "properties": {"a": {}}}]}));
        assert_eq!(branches["anyOf"][0]["additionalProperties"], json!(false));
    }

    #[test]
    fn stated_bounds_and_listed_values_are_never_contradicted() {
        let s = bounded(&json!({"type": "object", "properties": {
            "ns": {"type": "integer", "minimum": 1.0e17},
            "neg": {"type": "integer", "maximum": -5},
            "code": {"type": "integer", "enum": [12345678901234567890u64]},
            "ratio": {"type": "number", "const": 1.23456789012345},
        }}));
        let p = &s["properties"];
        assert_eq!(
            p["ns"]["maximum"],
            json!(100_000_000_000_000_000i64 + INTEGER_LIMIT)
        );
        assert_eq!(p["neg"]["minimum"], json!(-5 - INTEGER_LIMIT));
        assert!(p["code"].get("maximum").is_none());
        assert!(p["ratio"].get("multipleOf").is_none());
    }
}
