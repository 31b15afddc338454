//! The string and number functions templates and expression rules share beyond
//! minijinja's built-ins: regular expressions, Kubernetes quantities and semantic
//! versions. Each is pure and bounded: regular expressions run in linear time with a
//! capped program size, and every failure names the function and what to fix.

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};
use regex::{Regex, RegexBuilder};

/// Largest compiled regular expression a template may build, in bytes.
const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// Adds the functions to `env`, each as a filter and, where it reads as one, a test.
pub fn register(env: &mut Environment<'static>) {
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_filter("regex_match", regex_match);
    env.add_test("regex_match", regex_match);
    env.add_filter("regex_search", regex_search);
    env.add_filter("regex_captures", regex_captures);
    env.add_filter("regex_replace", regex_replace);
    env.add_filter("quantity", quantity);
    env.add_function("quantity", quantity);
    env.add_function("semver_compare", semver_compare);
    env.add_filter("semver_match", semver_match);
    env.add_test("semver_match", semver_match);
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

fn compile(function: &str, pattern: &str) -> Result<Regex, Error> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| invalid(format!("{function}: invalid regular expression `{pattern}`: {e}")))
}

/// True when `pattern` matches anywhere in `value` (anchor it with `^…$` for the whole).
fn regex_match(value: &str, pattern: &str) -> Result<bool, Error> {
    Ok(compile("regex_match", pattern)?.is_match(value))
}

/// The first match of `pattern` in `value`, or none.
fn regex_search(value: &str, pattern: &str) -> Result<Value, Error> {
    let found = compile("regex_search", pattern)?.find(value);
    Ok(found.map_or(Value::from(()), |m| Value::from(m.as_str())))
}

/// The capture groups of the first match, or none when nothing matches: a map by name
/// when the pattern names its groups, otherwise a list (group 1 first). A group that took
/// no part in the match is none.
fn regex_captures(value: &str, pattern: &str) -> Result<Value, Error> {
    let re = compile("regex_captures", pattern)?;
    let Some(caps) = re.captures(value) else {
        return Ok(Value::from(()));
    };
    let text = |m: Option<regex::Match<'_>>| m.map_or(Value::from(()), |m| Value::from(m.as_str()));
    if re.capture_names().flatten().next().is_some() {
        let named: std::collections::BTreeMap<String, Value> = re
            .capture_names()
            .flatten()
            .map(|name| (name.to_string(), text(caps.name(name))))
            .collect();
        return Ok(Value::from(named));
    }
    Ok(Value::from(caps.iter().skip(1).map(text).collect::<Vec<_>>()))
}

/// `value` with every match of `pattern` replaced; `$1` and `${name}` insert groups.
fn regex_replace(value: &str, pattern: &str, replacement: &str) -> Result<String, Error> {
    Ok(compile("regex_replace", pattern)?
        .replace_all(value, replacement)
        .into_owned())
}

/// A Kubernetes quantity (`500m`, `1Gi`, `2`) as a number, so two compare by value:
/// `quantity("1Gi") > quantity("512Mi")`. A number passes through.
fn quantity(value: &Value) -> Result<f64, Error> {
    if let Some(text) = value.as_str() {
        return crate::quantity::Quantity::parse(text.trim())
            .map(|q| q.as_f64())
            .ok_or_else(|| {
                invalid(format!(
                    "quantity: `{text}` is not a Kubernetes quantity (such as 500m, 2, 1Gi or 1e3)"
                ))
            });
    }
    f64::try_from(value.clone())
        .map_err(|_| invalid(format!("quantity: expected a string or a number, got {}", value.kind())))
}

fn version(function: &str, text: &str) -> Result<semver::Version, Error> {
    let bare = text.trim().trim_start_matches('v');
    semver::Version::parse(bare).map_err(|e| {
        invalid(format!(
            "{function}: `{text}` is not a semantic version (MAJOR.MINOR.PATCH, a leading v allowed): {e}"
        ))
    })
}

/// -1, 0 or 1 as version `a` is lower than, equal to or higher than `b`, by semantic
/// version precedence (a pre-release sorts before its release; build metadata is ignored).
fn semver_compare(a: &str, b: &str) -> Result<i64, Error> {
    let (a, b) = (version("semver_compare", a)?, version("semver_compare", b)?);
    Ok(match a.cmp_precedence(&b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })
}

/// Whether `value` satisfies the requirement, as Cargo writes them: `>=1.2, <2`, `^1.4`, `~1.2.3`.
fn semver_match(value: &str, requirement: &str) -> Result<bool, Error> {
    let req = semver::VersionReq::parse(requirement).map_err(|e| {
        invalid(format!(
            "semver_match: `{requirement}` is not a version requirement (such as >=1.2, <2): {e}"
        ))
    })?;
    Ok(req.matches(&version("semver_match", value)?))
}

#[cfg(test)]
mod tests {
    use minijinja::context;

    fn render(source: &str) -> Result<String, minijinja::Error> {
        super::super::templates::environment().render_str(source, context!(name => "web-01.prod"))
    }

    fn ok(source: &str) -> String {
        render(source).unwrap_or_else(|e| panic!("{source}: {e}"))
    }

    #[test]
    fn python_string_methods_work() {
        assert_eq!(
            ok("{{ name.startswith('web') }} {{ name.endswith('dev') }}"),
            "True False"
        );
        assert_eq!(ok("{{ name.split('.') | last }}"), "prod");
        assert_eq!(ok("{{ name.replace('-', '_').upper() }}"), "WEB_01.PROD");
    }

    #[test]
    fn regular_expressions_match_capture_and_replace() {
        assert_eq!(ok(r"{{ name is regex_match('^web-\\d+') }}"), "True");
        assert_eq!(ok(r"{{ name | regex_match('^db') }}"), "False");
        assert_eq!(ok(r"{{ name | regex_search('\\d+') }}"), "01");
        assert_eq!(
            ok(r"{{ name | regex_captures('^(\\w+)-(\\d+)') | join(',') }}"),
            "web,01"
        );
        assert_eq!(ok(r"{{ (name | regex_captures('(?P<env>\\w+)$'))['env'] }}"), "prod");
        assert_eq!(ok(r"{{ name | regex_captures('^x(\\d)') is none }}"), "True");
        assert_eq!(ok(r"{{ name | regex_replace('\\.(\\w+)$', '-$1') }}"), "web-01-prod");
        let err = render("{{ name | regex_match('(') }}").unwrap_err();
        assert!(
            err.to_string().contains("regex_match: invalid regular expression `(`"),
            "{err}"
        );
    }

    #[test]
    fn int_takes_a_default_instead_of_failing() {
        assert_eq!(ok("{{ 'x' | int(default=3) }} {{ '12' | int }}"), "3 12");
        assert!(render("{{ 'x' | int }}").is_err());
    }

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(ok("{{ quantity('1Gi') > quantity('512Mi') }}"), "True");
        assert_eq!(ok("{{ '1500m' | quantity == 1.5 }}"), "True");
        assert_eq!(ok("{{ quantity(2) }}"), "2.0");
        let err = render("{{ quantity('lots') }}").unwrap_err();
        assert!(err.to_string().contains("`lots` is not a Kubernetes quantity"), "{err}");
    }

    #[test]
    fn semantic_versions_compare_by_precedence() {
        assert_eq!(ok("{{ semver_compare('v1.10.0', '1.9.3') }}"), "1");
        assert_eq!(ok("{{ semver_compare('1.2.0-rc.1', '1.2.0') }}"), "-1");
        assert_eq!(ok("{{ semver_compare('1.2.0+build', '1.2.0') }}"), "0");
        assert_eq!(ok("{{ '1.4.2' is semver_match('>=1.2, <2') }}"), "True");
        assert_eq!(ok("{{ '2.0.0' | semver_match('^1.4') }}"), "False");
        let err = render("{{ semver_compare('1.2', '1.0.0') }}").unwrap_err();
        assert!(err.to_string().contains("`1.2` is not a semantic version"), "{err}");
    }
}
