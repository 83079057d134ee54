//! JSON values both wire adapters (`openai`, `anthropic`) put into a request body. It sits
//! below them and `wire`, and imports nothing of the crate.

use serde_json::Value;

/// A temperature as the JSON number a person would write: `0.2f32` is sent as `0.2`, not as
/// its widened `0.20000000298023224`.
pub(crate) fn temperature_value(t: f32) -> Value {
    let shortest = format!("{t}").parse::<f64>().unwrap_or(f64::from(t));
    serde_json::Number::from_f64(shortest).map_or(Value::Null, Value::Number)
}
