//! A tool's result (MCP `CallToolResult`) as text for the model and data for the UI. Text
//! blocks are the text; an image, audio or binary resource is named, never inlined (base64 is
//! not text a model can read, and it would fill the context); structured content stands in
//! when there is no text. Read from the result's JSON, so a block type added to the protocol
//! later is named rather than lost.

use serde_json::{Value, json};

/// Text of one result, and whether the tool reported an error.
pub fn result_text(result: &Value) -> (String, bool) {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut parts: Vec<String> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().map(block_text).collect())
        .unwrap_or_default();
    if parts.iter().all(|p| p.trim().is_empty())
        && let Some(structured) = result.get("structuredContent")
    {
        parts = vec![structured.to_string()];
    }
    (parts.join("\n"), is_error)
}

fn block_text(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        kind @ ("image" | "audio") => format!(
            "[{kind} ({}), {} bytes; not shown]",
            field("mimeType"),
            field("data").len() * 3 / 4
        ),
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let of = |key: &str| resource.get(key).and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {}]\n{text}", of("uri")),
                None => format!(
                    "[resource {} ({}); binary, not shown]",
                    of("uri"),
                    of("mimeType")
                ),
            }
        }
        "resource_link" => format!("[link: {} {}]", field("name"), field("uri")),
        other => format!("[{other} content; not shown]"),
    }
}

/// The data a UI card shows: the server, the tool, the text (cut to `max_bytes`).
pub fn result_data(
    server: &str,
    tool: &str,
    text: &str,
    is_error: bool,
    max_bytes: usize,
) -> Value {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    json!({
        "server": server,
        "tool": tool,
        "isError": is_error,
        "text": &text[..end],
        "truncated": end < text.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_text_and_binary_is_named_not_inlined() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA", "mimeType": "x/y"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "hologram"}
        ], "isError": true});
        let (text, is_error) = result_text(&result);
        assert!(is_error);
        assert_eq!(
            text,
            "hello\n[image (image/png), 3 bytes; not shown]\n[resource file:///a.txt]\ninside\n\
             [resource file:///b.bin (x/y); binary, not shown]\n[link: c file:///c]\n\
             [hologram content; not shown]"
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_text() {
        let (text, is_error) = result_text(&json!({"content": [], "structuredContent": {"t": 20}}));
        assert_eq!((text.as_str(), is_error), ("{\"t\":20}", false));
        let data = result_data("s", "s/t", "héllo", false, 2);
        assert_eq!(data["text"], "h");
        assert_eq!(data["truncated"], true);
    }
}
