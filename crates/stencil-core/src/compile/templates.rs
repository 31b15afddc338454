//! The minijinja environment templates run in: strict about undefined values, bounded by
//! fuel and recursion limits, no autoescape, and the filters Kubernetes authors know from
//! Helm. It has no loader, so templates cannot read files, the environment or the network.

use base64::Engine as _;
use minijinja::value::{Kwargs, Value};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior};
use rand::Rng as _;
use sha2::{Digest as _, Sha256};

use crate::labels::{MAX_LABEL_VALUE, to_dns_label};

/// Instructions one template render may execute before it is stopped.
pub const FUEL: u64 = 2_000_000;

/// Deepest nesting of macros, includes and recursive loops.
pub const RECURSION_LIMIT: usize = 64;

/// Longest password `random_password` makes.
const MAX_PASSWORD: usize = 1024;

/// A fresh environment with Stencil's settings and filters and no templates.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // SemiStrict: printing, iterating or reading through an undefined value fails, while
    // `{% if parent.spec.optional %}` on an absent field is simply false.
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(RECURSION_LIMIT);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_debug(true);
    env.add_filter("toyaml", toyaml);
    env.add_filter("indent", indent);
    env.add_filter("nindent", nindent);
    env.add_filter("quote", quote);
    env.add_filter("b64encode", b64encode);
    env.add_filter("b64decode", b64decode);
    env.add_filter("sha256", sha256);
    env.add_filter("required", required);
    env.add_function("required", required);
    env.add_filter("dns_label", dns_label);
    env.add_function("dns_label", dns_label);
    env.add_function("random_password", random_password);
    super::functions::register(&mut env);
    env
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// The text a filter works on: strings as they are, everything else as JSON.
fn text_of(value: &Value) -> Result<String, Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    match value.as_str() {
        Some(s) => Ok(s.to_string()),
        None => serde_json::to_string(value).map_err(|e| invalid(e.to_string())),
    }
}

fn toyaml(value: Value) -> Result<String, Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    let text = crate::yaml::to_string(&value).map_err(|e| invalid(e.to_string()))?;
    Ok(text.trim_end_matches('\n').to_string())
}

/// Helm's `indent`: every non-empty line, the first included, gets `width` spaces.
fn indent(value: Value, width: usize) -> Result<String, Error> {
    let text = text_of(&value)?;
    let pad = " ".repeat(width);
    let lines: Vec<String> = text
        .split('\n')
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{pad}{l}")
            }
        })
        .collect();
    Ok(lines.join("\n"))
}

/// Helm's `nindent`: a newline, then `indent`.
fn nindent(value: Value, width: usize) -> Result<String, Error> {
    Ok(format!("\n{}", indent(value, width)?))
}

/// A double-quoted YAML (and JSON) string.
fn quote(value: Value) -> Result<String, Error> {
    let text = text_of(&value)?;
    serde_json::to_string(&text).map_err(|e| invalid(e.to_string()))
}

fn b64encode(value: Value) -> Result<String, Error> {
    Ok(base64::engine::general_purpose::STANDARD.encode(text_of(&value)?))
}

fn b64decode(value: Value) -> Result<String, Error> {
    let text = text_of(&value)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| invalid(format!("b64decode: not base64: {e}")))?;
    String::from_utf8(bytes).map_err(|_| invalid("b64decode: the decoded bytes are not UTF-8"))
}

/// Hex SHA-256 of a string, or of any other value's JSON form.
fn sha256(value: Value) -> Result<String, Error> {
    Ok(hex(&Sha256::digest(text_of(&value)?.as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fails the render with the author's message when the value is undefined, none or "".
fn required(value: Value, message: Option<String>) -> Result<Value, Error> {
    let missing = value.is_undefined() || value.is_none() || value.as_str() == Some("");
    if missing {
        let message = message.unwrap_or_else(|| "a required value is missing".to_string());
        return Err(invalid(message));
    }
    Ok(value)
}

/// A DNS-1123 label made from any string: lower-case alphanumerics and '-', at most
/// `max` (63) characters; a value that had to be cut ends with a stable hash suffix.
fn dns_label(value: Value, kwargs: Kwargs) -> Result<String, Error> {
    let text = text_of(&value)?;
    let max: usize = kwargs.get::<Option<usize>>("max")?.unwrap_or(MAX_LABEL_VALUE);
    kwargs.assert_all_used()?;
    if !(10..=MAX_LABEL_VALUE).contains(&max) {
        return Err(invalid(format!("dns_label: max must be 10..=63, got {max}")));
    }
    Ok(to_dns_label(&text, max))
}

thread_local! {
    /// The source `random_password` draws from on this thread while [`seeded`] runs.
    static SEEDED: std::cell::RefCell<Option<rand::rngs::StdRng>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `random_password` drawing from a generator seeded with `seed` on this
/// thread, so a render is reproducible (a golden case with `seed:`); without a seed, or
/// outside `seeded`, it draws from the thread's CSPRNG.
pub fn seeded<T>(seed: Option<u64>, f: impl FnOnce() -> T) -> T {
    use rand::SeedableRng as _;
    let previous = SEEDED.with(|s| s.replace(seed.map(rand::rngs::StdRng::seed_from_u64)));
    let out = f();
    SEEDED.with(|s| *s.borrow_mut() = previous);
    out
}

/// A random alphanumeric password: from the thread's CSPRNG, or the seeded generator of
/// [`seeded`]. It changes on every render, so it belongs in children with
/// `updatePolicy: OnCreate`.
fn random_password(len: usize) -> Result<String, Error> {
    if !(1..=MAX_PASSWORD).contains(&len) {
        return Err(invalid(format!(
            "random_password: length must be 1..={MAX_PASSWORD}, got {len}"
        )));
    }
    let draw = |rng: &mut dyn rand::RngCore| -> String {
        (0..len)
            .map(|_| char::from(rng.sample(rand::distr::Alphanumeric)))
            .collect()
    };
    Ok(SEEDED.with(|s| match s.borrow_mut().as_mut() {
        Some(rng) => draw(rng),
        None => draw(&mut rand::rng()),
    }))
}

/// The line and column of a minijinja error inside its template source.
pub(crate) fn template_position(err: &minijinja::Error, source: &str) -> Option<(u64, u64)> {
    if let Some(range) = err.range() {
        return Some(super::position::line_column(source, range.start));
    }
    err.line().map(|l| (l as u64, 1))
}

/// A minijinja error's message without the template name and line it repeats.
pub(crate) fn template_message(err: &minijinja::Error) -> String {
    let mut message = err.kind().to_string();
    if let Some(detail) = err.detail() {
        message = format!("{message}: {detail}");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    fn render(source: &str, ctx: Value) -> Result<String, Error> {
        environment().render_str(source, ctx)
    }

    #[test]
    fn toyaml_and_nindent_compose_like_helm() {
        let ctx = context!(labels => context!(app => "web", tier => "1"));
        let out = render("metadata:\n  labels:{{ labels | toyaml | nindent(4) }}", ctx).unwrap();
        assert_eq!(out, "metadata:\n  labels:\n    app: web\n    tier: \"1\"");
    }

    #[test]
    fn indent_pads_every_non_empty_line() {
        assert_eq!(
            render("{{ 'a\\n\\nb' | indent(2) }}", context!()).unwrap(),
            "  a\n\n  b"
        );
    }

    #[test]
    fn quote_escapes() {
        assert_eq!(
            render("{{ 'say \"hi\"' | quote }}", context!()).unwrap(),
            r#""say \"hi\"""#
        );
        assert_eq!(render("{{ 5 | quote }}", context!()).unwrap(), r#""5""#);
    }

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        assert_eq!(render("{{ 'hello' | b64encode }}", context!()).unwrap(), "aGVsbG8=");
        assert_eq!(render("{{ 'aGVsbG8=' | b64decode }}", context!()).unwrap(), "hello");
        let err = render("{{ '***' | b64decode }}", context!()).unwrap_err();
        assert!(err.to_string().contains("not base64"), "{err}");
    }

    #[test]
    fn sha256_is_the_hex_digest() {
        assert_eq!(
            render("{{ 'abc' | sha256 }}", context!()).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn required_fails_with_the_authors_message() {
        let err = render("{{ x | required('spec.x must be set') }}", context!()).unwrap_err();
        assert!(err.to_string().contains("spec.x must be set"), "{err}");
        let err = render("{{ required(x, 'x please') }}", context!(x => "")).unwrap_err();
        assert!(err.to_string().contains("x please"), "{err}");
        assert_eq!(render("{{ x | required('m') }}", context!(x => 3)).unwrap(), "3");
    }

    #[test]
    fn dns_label_is_safe_and_stable() {
        assert_eq!(to_dns_label("My_App.Web", 63), "my-app-web");
        let long = "a".repeat(100);
        let cut = to_dns_label(&long, 63);
        assert_eq!(cut.len(), 63);
        assert_eq!(cut, to_dns_label(&long, 63));
        assert_ne!(cut, to_dns_label(&"a".repeat(101), 63));
        assert_eq!(
            render("{{ ('x' * 70) | dns_label(max=20) }}", context!())
                .unwrap()
                .len(),
            20
        );
    }

    #[test]
    fn random_password_has_the_length_asked_and_varies() {
        let a = render("{{ random_password(32) }}", context!()).unwrap();
        let b = render("{{ random_password(32) }}", context!()).unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
        assert!(render("{{ random_password(0) }}", context!()).is_err());
    }

    #[test]
    fn a_seeded_render_draws_the_same_passwords() {
        let draw = || render("{{ random_password(16) }} {{ random_password(16) }}", context!()).unwrap();
        let (a, b) = (seeded(Some(7), draw), seeded(Some(7), draw));
        assert_eq!(a, b);
        assert_ne!(a, seeded(Some(8), draw));
        assert_ne!(seeded(None, draw), seeded(None, draw));
    }

    #[test]
    fn fuel_stops_a_runaway_loop() {
        let nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let err = render(nested, context!()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OutOfFuel, "{err}");
    }

    #[test]
    fn printing_an_undefined_value_fails_but_testing_it_does_not() {
        assert!(
            render(
                "{{ parent.spec.missing }}",
                context!(parent => context!(spec => context!()))
            )
            .is_err()
        );
        let out = render(
            "{% if parent.spec.missing %}a{% else %}b{% endif %}",
            context!(parent => context!(spec => context!())),
        )
        .unwrap();
        assert_eq!(out, "b");
    }
}
