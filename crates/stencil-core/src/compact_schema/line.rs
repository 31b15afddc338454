//! One field line of the compact schema, `TYPE | MARKER=VALUE ...`, read into its type
//! expression and its markers. Nothing here knows what a type or a marker means; that is
//! [`super::types`] and [`super::markers`].

/// A type expression: a built-in or named type, a list of one, or a map of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeExpr {
    /// A built-in or `types` name (`string`, `quantity`, `Person`).
    Name(String),
    /// `[]T`.
    List(Box<TypeExpr>),
    /// `map[string]T`; a map's keys are always strings.
    Map(Box<TypeExpr>),
}

/// One `key=value` marker; a quoted value is unquoted, `\"` and `\\` unescaped and any
/// other backslash kept (so `pattern="^\d+$"` means what it says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The marker's name, as written.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// How deep `[]` and `map[string]` may nest.
const MAX_NESTING: usize = 16;

/// Reads a field line into its type (absent when the line holds markers only, as a
/// `$self` line may) and markers.
pub fn parse(line: &str) -> Result<(Option<TypeExpr>, Vec<Marker>), String> {
    // A `|` inside a marker's value (`validation="a || b"`) is not the separator, and a
    // line whose first marker comes before any `|` has no type.
    let (ty, markers) = match line.split_once('|') {
        Some((ty, markers)) if !ty.contains('=') => (ty.trim(), parse_markers(markers)?),
        _ if line.contains('=') => ("", parse_markers(line)?),
        _ => (line.trim(), Vec::new()),
    };
    let ty = if ty.is_empty() { None } else { Some(parse_type(ty, 0)?) };
    Ok((ty, markers))
}

fn parse_type(s: &str, depth: usize) -> Result<TypeExpr, String> {
    if depth > MAX_NESTING {
        return Err(format!("type nested more than {MAX_NESTING} deep"));
    }
    let s = s.trim();
    if let Some(elem) = s.strip_prefix("[]") {
        if elem.trim().is_empty() {
            return Err("`[]` needs an element type, e.g. `[]string`".into());
        }
        return Ok(TypeExpr::List(Box::new(parse_type(elem, depth + 1)?)));
    }
    if s.starts_with("map[") {
        let value = s
            .strip_prefix("map[string]")
            .ok_or_else(|| format!("`{s}`: a map's keys are strings, write `map[string]T`"))?;
        if value.trim().is_empty() {
            return Err("`map[string]` needs a value type, e.g. `map[string]string`".into());
        }
        return Ok(TypeExpr::Map(Box::new(parse_type(value, depth + 1)?)));
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if s.is_empty() || !s.starts_with(|c: char| c.is_ascii_alphabetic()) || !s.chars().all(name_char) {
        return Err(format!(
            "`{s}` is not a type: write a type name, `[]T` or `map[string]T`, then `|` and markers"
        ));
    }
    Ok(TypeExpr::Name(s.to_string()))
}

/// The lexer's state between characters.
#[derive(Default)]
struct Lexer {
    markers: Vec<Marker>,
    key: Option<String>,
    buffer: String,
    quoted: bool,
    escaped: bool,
    depth: i32,
}

impl Lexer {
    fn feed(&mut self, c: char) -> Result<(), String> {
        let bare = !self.quoted && self.depth == 0;
        match c {
            '=' if self.key.is_none() && bare => {
                let key = std::mem::take(&mut self.buffer).trim().to_string();
                if key.is_empty() {
                    return Err("a marker has no name before `=`".into());
                }
                self.key = Some(key);
                return Ok(());
            }
            c if c.is_whitespace() && bare => return self.end_marker(),
            '"' if !self.escaped => self.quoted = !self.quoted,
            '{' | '[' if !self.quoted => self.depth += 1,
            '}' | ']' if !self.quoted => {
                self.depth -= 1;
                if self.depth < 0 {
                    return Err(format!("`{c}` closes nothing"));
                }
            }
            _ => {}
        }
        self.escaped = c == '\\' && self.quoted && !self.escaped;
        self.buffer.push(c);
        Ok(())
    }

    fn end_marker(&mut self) -> Result<(), String> {
        let text = std::mem::take(&mut self.buffer);
        match self.key.take() {
            Some(key) => self.markers.push(Marker {
                key,
                value: unquote(&text),
            }),
            None if text.trim().is_empty() => {}
            None => return Err(format!("`{}` is not a marker: write `name=value`", text.trim())),
        }
        Ok(())
    }
}

/// Reads `key=value key="a quoted value" key=[1, 2]`.
fn parse_markers(s: &str) -> Result<Vec<Marker>, String> {
    let mut lexer = Lexer::default();
    for c in s.chars() {
        lexer.feed(c)?;
    }
    if lexer.quoted {
        return Err("a quote is not closed".into());
    }
    if lexer.depth > 0 {
        return Err("a `[` or `{` is not closed".into());
    }
    lexer.end_marker()?;
    Ok(lexer.markers)
}

fn unquote(value: &str) -> String {
    let value = value.trim();
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some(next @ ('"' | '\\')) => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> TypeExpr {
        TypeExpr::Name(s.into())
    }

    fn marker(key: &str, value: &str) -> Marker {
        Marker {
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn a_line_is_a_type_then_markers() {
        let (ty, markers) = parse("string | required=true description=\"The name\"").unwrap();
        assert_eq!(ty, Some(name("string")));
        assert_eq!(markers, [marker("required", "true"), marker("description", "The name")]);
    }

    #[test]
    fn lists_and_maps_nest() {
        let (ty, _) = parse("[]map[string][]Person").unwrap();
        let expected = TypeExpr::List(Box::new(TypeExpr::Map(Box::new(TypeExpr::List(Box::new(name(
            "Person",
        )))))));
        assert_eq!(ty, Some(expected));
    }

    #[test]
    fn quoted_values_keep_spaces_brackets_and_regex_escapes() {
        let (_, markers) = parse(r#"string | pattern="^\d+ [a-z]$" default="say \"hi\"" enum="a, b""#).unwrap();
        assert_eq!(
            markers,
            [
                marker("pattern", r"^\d+ [a-z]$"),
                marker("default", "say \"hi\""),
                marker("enum", "a, b")
            ]
        );
    }

    #[test]
    fn bracketed_values_may_hold_spaces() {
        let (ty, markers) = parse(r#"validation="a || b" message="c""#).unwrap();
        assert_eq!(
            (ty, markers),
            (None, vec![marker("validation", "a || b"), marker("message", "c")])
        );
        let (_, markers) = parse(r#"[]string | default=["a", "b"] maxItems=3"#).unwrap();
        assert_eq!(markers, [marker("default", r#"["a", "b"]"#), marker("maxItems", "3")]);
    }

    #[test]
    fn a_line_of_markers_alone_has_no_type() {
        let (ty, markers) = parse("required=true").unwrap();
        assert_eq!(ty, None);
        assert_eq!(markers, [marker("required", "true")]);
    }

    #[test]
    fn malformed_lines_say_what_to_write() {
        for (line, expect) in [
            ("map[int]string", "a map's keys are strings"),
            ("[]", "needs an element type"),
            ("string | required", "`required` is not a marker"),
            ("string | description=\"open", "a quote is not closed"),
            ("string | default=[1, 2", "not closed"),
            ("string | default=1]", "closes nothing"),
            ("string | =true", "no name before"),
            ("str ing", "is not a type"),
        ] {
            let err = parse(line).unwrap_err();
            assert!(err.contains(expect), "{line}: {err}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}string", "[]".repeat(40));
        assert!(parse(&deep).unwrap_err().contains("nested"));
    }
}
