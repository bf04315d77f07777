//! `now` and `calculate`: the two tools that need neither files nor the database.

use serde_json::{Value, json};

use super::arg_str;
use crate::calc;
use crate::clock;
use crate::error::{Error, Result};
use crate::tool::ToolOutput;

pub(crate) fn now() -> Result<ToolOutput> {
    let now = clock::local_now();
    let zone = clock::zone_name(&now);
    let text = format!(
        "It is {} {}, {} (time zone {zone}, UTC{}).",
        now.strftime("%A"),
        now.strftime("%Y-%m-%d"),
        now.strftime("%H:%M"),
        now.strftime("%:z")
    );
    let data = json!({
        "date": now.strftime("%Y-%m-%d").to_string(),
        "time": now.strftime("%H:%M:%S").to_string(),
        "weekday": now.strftime("%A").to_string(),
        "timeZone": zone,
        "utcOffset": now.strftime("%:z").to_string(),
        "rfc3339": now.timestamp().display_with_offset(now.offset()).to_string(),
    });
    Ok(ToolOutput::new(text, data, false))
}

pub(crate) fn calculate(args: &Value) -> Result<ToolOutput> {
    let expression = arg_str(args, "expression").trim();
    let value = calc::evaluate(expression).map_err(|problem| Error::Calculation {
        expression: expression.to_string(),
        problem,
    })?;
    let shown = calc::format_number(value);
    Ok(ToolOutput::new(
        format!("{expression} = {shown}"),
        json!({"expression": expression, "value": value, "text": shown}),
        false,
    ))
}
