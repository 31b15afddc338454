//! Golden cases for `stencil test`: a parent plus observed objects and lookups in, the
//! expected children, waiting list and status out, compared with a readable diff.
//!
//! A case is a file `NAME.case.yaml` beside `NAME.expected.yaml`:
//!
//! ```yaml
//! definition: ../../operators/database.yaml   # relative to the case file
//! definitionName: databases.stencil.dev       # when the file holds several
//! parent: {...}                               # or parentFile: path
//! observed: [...]                             # objects carrying stencil.dev/child
//! lookups: [...]
//! convertTo: v1alpha1                         # instead: the parent converted, and back
//! seed: 7                                     # random_password draws reproducibly
//! ```
//!
//! A case with `convertTo` expects `{converted: ...}`, the parent at that version, and
//! fails when converting it back loses a field.
//!
//! In an expected file the string `<any>` matches any value, for output that is random
//! by design (`random_password` without `seed`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use stencil::compile::CompiledDefinition;
use stencil::offline::{Admission, render_offline, split_observed};
use stencil::{render, yaml};

/// The wildcard an expected file may hold in place of any value.
pub const ANY: &str = "<any>";

/// Why a case could not be run (as opposed to running and not matching).
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not the YAML it should be.
    #[error("{path}:{source}")]
    Yaml {
        /// The file.
        path: String,
        /// Where and why.
        source: yaml::YamlError,
    },
    /// The case's definition file did not compile or does not hold the named definition.
    #[error("{0}")]
    Definition(String),
    /// The case's inputs are inconsistent.
    #[error("{path}: {message}")]
    Input {
        /// The case file.
        path: String,
        /// What to fix.
        message: String,
    },
    /// The render failed.
    #[error("{0}")]
    Render(#[from] render::RenderFailure),
    /// The conversion failed.
    #[error("{0}")]
    Convert(#[from] stencil::convert::ConvertError),
    /// Converting the parent there and back loses fields.
    #[error("{path}: a round trip through {version} loses {}", fields.join(", "))]
    Lossy {
        /// The case file.
        path: String,
        /// The version converted to.
        version: String,
        /// The paths lost.
        fields: Vec<String>,
    },
}

/// The inputs of a case file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    definition: PathBuf,
    #[serde(default)]
    definition_name: Option<String>,
    #[serde(default)]
    parent: Option<Value>,
    #[serde(default)]
    parent_file: Option<PathBuf>,
    #[serde(default)]
    observed: Vec<Value>,
    #[serde(default)]
    lookups: Vec<Value>,
    #[serde(default)]
    convert_to: Option<String>,
    /// Seeds `random_password`, so its output can be expected as it is.
    #[serde(default)]
    seed: Option<u64>,
}

/// The outcome of one case.
#[derive(Debug)]
pub enum Outcome {
    /// The render matched the expected file.
    Passed,
    /// It did not; the diff is expected → actual.
    Failed(String),
    /// The expected file was written.
    Updated,
}

/// Picks the one definition a command means: the named one, or the only one.
pub fn pick<'a>(
    defs: &'a [CompiledDefinition],
    name: Option<&str>,
    file: &str,
) -> Result<&'a CompiledDefinition, String> {
    match name {
        Some(n) => defs
            .iter()
            .find(|d| d.name == n)
            .ok_or_else(|| format!("{file}: no definition named {n}")),
        None if defs.len() == 1 => Ok(&defs[0]),
        None => Err(format!("{file} holds {} definitions; name one", defs.len())),
    }
}

fn read(path: &Path) -> Result<String, CaseError> {
    std::fs::read_to_string(path).map_err(|source| CaseError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, CaseError> {
    yaml::document(text).map_err(|source| CaseError::Yaml {
        path: path.display().to_string(),
        source,
    })
}

/// Every `*.case.yaml` file at or below `dir`, sorted.
pub fn find_cases(dir: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let is_case = |name: &str| name.ends_with(".case.yaml");
    let files = stencil::source::files::files_below(dir, &is_case).map_err(|e| CaseError::Io {
        path: e.path,
        source: e.source,
    })?;
    Ok(files
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".case.yaml"))
        .collect())
}

/// The expected-output file beside a case file.
pub fn expected_path(case: &Path) -> PathBuf {
    let name = case.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    case.with_file_name(name.replace(".case.yaml", ".expected.yaml"))
}

/// Renders a case and returns the output as `stencil render -o json` would.
pub fn render_case(case_path: &Path) -> Result<Value, CaseError> {
    let case: Case = parse(case_path, &read(case_path)?)?;
    let dir = case_path.parent().unwrap_or(Path::new("."));
    let def_path = dir.join(&case.definition);
    let loaded = stencil::source::files::load(std::slice::from_ref(&def_path))
        .map_err(|e| CaseError::Definition(e.to_string()))?;
    if !loaded.diagnostics.is_empty() {
        let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        return Err(CaseError::Definition(lines.join("\n")));
    }
    let def = pick(
        &loaded.definitions,
        case.definition_name.as_deref(),
        &def_path.display().to_string(),
    )
    .map_err(CaseError::Definition)?;
    let input_error = |message: String| CaseError::Input {
        path: case_path.display().to_string(),
        message,
    };
    let parent = match (case.parent, case.parent_file) {
        (Some(p), None) => p,
        (None, Some(f)) => {
            let path = dir.join(f);
            parse(&path, &read(&path)?)?
        }
        _ => return Err(input_error("give exactly one of parent and parentFile".into())),
    };
    if let Some(version) = &case.convert_to {
        let (converted, lost) = round_trip(def, &parent, version)?;
        if !lost.is_empty() {
            return Err(CaseError::Lossy {
                path: case_path.display().to_string(),
                version: version.clone(),
                fields: lost,
            });
        }
        return Ok(serde_json::json!({ "converted": converted }));
    }
    let observed = split_observed(case.observed, &parent);
    let scopes = stencil::compile::scopes(&loaded.definitions);
    let out = stencil::compile::templates::seeded(case.seed, || {
        render_offline(def, &scopes, &parent, &observed, &case.lookups, Admission::Admit)
    })?;
    Ok(out.to_json())
}

/// `object` converted to `version`, and the fields that converting it back to its own
/// version would lose (none, when the conversion is lossless).
pub fn round_trip(
    def: &CompiledDefinition,
    object: &Value,
    version: &str,
) -> Result<(Value, Vec<String>), stencil::convert::ConvertError> {
    let converted = stencil::convert::convert(def, object, version)?;
    let own = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(_, v)| v);
    let back = stencil::convert::convert(def, &converted, own)?;
    Ok((converted, stencil::convert::lost_fields(object, &back)))
}

/// Runs one case against its expected file, or rewrites that file when `update` is set.
pub fn run_case(case_path: &Path, update: bool) -> Result<Outcome, CaseError> {
    let actual = render_case(case_path)?;
    let expected_file = expected_path(case_path);
    let actual_text = yaml::to_string(&actual).map_err(|e| CaseError::Definition(e.to_string()))?;
    if update {
        std::fs::write(&expected_file, &actual_text).map_err(|source| CaseError::Io {
            path: expected_file.display().to_string(),
            source,
        })?;
        return Ok(Outcome::Updated);
    }
    let expected_text = read(&expected_file)?;
    let expected: Value = parse(&expected_file, &expected_text)?;
    if matches(&expected, &actual) {
        return Ok(Outcome::Passed);
    }
    let expected_canonical = yaml::to_string(&expected).unwrap_or(expected_text);
    let diff = similar::TextDiff::from_lines(&expected_canonical, &actual_text)
        .unified_diff()
        .context_radius(3)
        .header(&expected_file.display().to_string(), "rendered")
        .to_string();
    Ok(Outcome::Failed(diff))
}

/// Whether `actual` matches `expected`, where `<any>` in expected matches anything.
pub fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(s), _) if s == ANY => true,
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len() && e.iter().all(|(k, v)| a.get(k).is_some_and(|av| matches(v, av)))
        }
        (Value::Array(e), Value::Array(a)) => e.len() == a.len() && e.iter().zip(a).all(|(x, y)| matches(x, y)),
        _ => expected == actual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_matches_any_value_but_nothing_else_is_loose() {
        assert!(matches(
            &json!({"a": "<any>", "b": [1]}),
            &json!({"a": {"x": 1}, "b": [1]})
        ));
        assert!(!matches(&json!({"a": "<any>"}), &json!({"a": 1, "b": 2})));
        assert!(!matches(&json!([1, 2]), &json!([1])));
    }
}
