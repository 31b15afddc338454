//! Stencil's one YAML stack (serde-saphyr): reading document streams into JSON values
//! with error positions, and writing values back as YAML.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A YAML document that could not be read, with its 1-based position in the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct YamlError {
    /// 1-based line, or 0 when the parser gave no position.
    pub line: u64,
    /// 1-based column, or 0 when the parser gave no position.
    pub column: u64,
    /// What was wrong.
    pub message: String,
}

/// A value that could not be written as YAML.
#[derive(Debug, thiserror::Error)]
#[error("cannot write YAML: {0}")]
pub struct WriteError(String);

impl From<serde_saphyr::Error> for YamlError {
    fn from(err: serde_saphyr::Error) -> Self {
        let (line, column) = err.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
        YamlError {
            line,
            column,
            message: first_line(&err.to_string()),
        }
    }
}

/// The first meaningful line of a parser message; serde-saphyr appends source snippets
/// that Stencil prints itself with a file name.
fn first_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid YAML")
        .trim_start_matches("error: ")
        .to_string()
}

/// Documents in one stream: a collection child renders one per object, and its output is
/// bounded by size (1 MiB per template) rather than by the parser's default of 1,024.
const MAX_DOCUMENTS: usize = 100_000;

/// YAML 1.2 core schema: only `true`/`false` are booleans (`yes`, `on`, `y` stay
/// strings), duplicate keys are errors, and messages come without source snippets.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: MAX_DOCUMENTS,
        },
    }
}

/// Reads every non-empty document of a YAML stream.
///
/// # Errors
///
/// The text is not YAML, holds a duplicate key, a document does not fit `T`, or the stream
/// is over the document budget; the error has the line and column.
pub fn documents<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, YamlError> {
    Ok(serde_saphyr::from_multiple_with_options::<T>(text, options())?)
}

/// Reads exactly one YAML document.
///
/// # Errors
///
/// The text is not one YAML document that fits `T`; the error has the line and column.
pub fn document<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    Ok(serde_saphyr::from_str_with_options::<T>(text, options())?)
}

/// Writes a value as one YAML document, without a leading `---`.
///
/// # Errors
///
/// The value cannot be written as YAML (a map with keys that are not strings).
pub fn to_string<T: Serialize>(value: &T) -> Result<String, WriteError> {
    serde_saphyr::to_string(value).map_err(|e| WriteError(e.to_string()))
}

/// Writes values as a YAML stream, each document introduced by `---`.
///
/// # Errors
///
/// A value cannot be written as YAML ([`to_string`]).
pub fn to_stream(values: &[Value]) -> Result<String, WriteError> {
    let mut out = String::new();
    for value in values {
        out.push_str("---\n");
        out.push_str(&to_string(value)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stream_may_hold_thousands_of_documents() {
        let text: String = (0..5000).map(|i| format!("---\nn: {i}\n")).collect();
        assert_eq!(documents::<Value>(&text).unwrap().len(), 5000);
    }

    #[test]
    fn yes_and_y_are_strings_as_in_yaml_1_2() {
        let v: Value = document("a: y\nb: yes\nc: true\nd: on\n").unwrap();
        assert_eq!(v, json!({"a": "y", "b": "yes", "c": true, "d": "on"}));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        assert!(document::<Value>("a: 1\na: 2\n").is_err());
    }

    #[test]
    fn reads_a_stream_and_skips_empty_documents() {
        let docs: Vec<Value> = documents("a: 1\n---\n# only a comment\n---\nb: [x, y]\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": ["x", "y"]})]);
    }

    #[test]
    fn reports_the_position_of_a_syntax_error() {
        let err = documents::<Value>("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
        assert!(!err.message.is_empty());
    }

    #[test]
    fn round_trips_values_that_need_quoting() {
        let value = json!({"s": "true", "n": "007", "m": "a: b", "e": "", "multi": "x\ny\n", "list": [1, "2"], "nested": {"k": null}});
        let text = to_string(&value).unwrap();
        let back: Value = document(&text).unwrap();
        assert_eq!(back, value, "{text}");
    }

    #[test]
    fn writes_a_stream_with_separators() {
        let text = to_stream(&[json!({"a": 1}), json!({"b": 2})]).unwrap();
        assert_eq!(text, "---\na: 1\n---\nb: 2\n");
    }
}
