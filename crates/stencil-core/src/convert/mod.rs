//! Converting a parent between its CRD's versions, purely: hub and spoke through the
//! storage version, by the definition's conversion templates. `metadata` is carried over
//! unchanged but for one annotation: when the target version cannot hold every field,
//! the storage version's `spec` and `status` ride along in it, so a round trip through
//! that version loses nothing.

mod lossless;

use minijinja::value::{Serde, Value as JinjaValue};
use serde_json::{Map, Value, json};

use crate::compile::CompiledDefinition;
use crate::definition::CrdVersion;
use crate::labels::CONVERSION_DATA;
use crate::render::RenderError;

pub use lossless::lost_fields;

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The definition declares no CRD, so it has no versions to convert between.
    #[error("definition {0} declares no CRD, so there is nothing to convert")]
    NoCrd(String),
    /// The object's apiVersion, or the one asked for, is not a version of the CRD.
    #[error("{object}: {api_version} is not a version of this CRD; it has {versions}")]
    UnknownVersion {
        /// The object.
        object: String,
        /// The apiVersion that is not known.
        api_version: String,
        /// The versions the CRD has.
        versions: String,
    },
    /// The object is not a Kubernetes object of the parent kind.
    #[error("{object}: {message}")]
    Malformed {
        /// The object.
        object: String,
        /// What is wrong.
        message: String,
    },
    /// A conversion template failed for this object.
    #[error("converting {object}: {source}")]
    Template {
        /// The object.
        object: String,
        /// Where in the definition and why.
        #[source]
        source: Box<RenderError>,
    },
    /// A conversion template rendered something other than a `spec`/`status` mapping.
    #[error("converting {object}: {location}: {template}: {message}")]
    Output {
        /// The object.
        object: String,
        /// The definition's file and line of the template.
        location: String,
        /// The template, e.g. `crd.versions[v1alpha1].conversion.toStorage`.
        template: String,
        /// What to fix.
        message: String,
    },
    /// A conversion template rendered what the target version's schema refuses.
    #[error("converting {object} to {version}: {location}: {template} renders what {version} refuses: {problems}")]
    Invalid {
        /// The object.
        object: String,
        /// The version converted to.
        version: String,
        /// The definition's file and line of the template.
        location: String,
        /// The template.
        template: String,
        /// Each path and what is wrong there.
        problems: String,
    },
}

/// `object` converted to `version` of its CRD, through the storage version.
///
/// # Errors
///
/// The definition declares no CRD, a version is not one of its versions, a conversion
/// template fails, or its output does not satisfy the target version's schema.
pub fn convert(def: &CompiledDefinition, object: &Value, version: &str) -> Result<Value, ConvertError> {
    let crd = def
        .spec
        .crd
        .as_ref()
        .ok_or_else(|| ConvertError::NoCrd(def.name.clone()))?;
    let id = identity(object);
    let unknown = |api_version: String| ConvertError::UnknownVersion {
        object: id.clone(),
        api_version,
        versions: crd
            .versions
            .iter()
            .map(|v| format!("{}/{}", def.parent.group, v.name))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| ConvertError::Malformed {
            object: id.clone(),
            message: "the object has no apiVersion".into(),
        })?;
    let from = api_version
        .strip_prefix(&format!("{}/", def.parent.group))
        .and_then(|v| crd.versions.iter().find(|c| c.name == v))
        .ok_or_else(|| unknown(api_version.to_string()))?;
    let to = crd
        .versions
        .iter()
        .find(|c| c.name == version)
        .ok_or_else(|| unknown(format!("{}/{version}", def.parent.group)))?;
    if object.get("kind").and_then(Value::as_str) != Some(def.parent.kind.as_str()) {
        return Err(ConvertError::Malformed {
            object: id,
            message: format!("the object is not a {}", def.parent.kind),
        });
    }
    if from.name == to.name {
        return Ok(object.clone());
    }
    let converter = Converter { def, id };
    let stored = if from.storage {
        let mut hub = object.clone();
        take_saved(&mut hub);
        hub
    } else {
        converter.up(object, from)?
    };
    if to.storage {
        Ok(stored)
    } else {
        converter.down(&stored, to)
    }
}

/// `Kind namespace/name`, as errors name an object.
fn identity(object: &Value) -> String {
    let field = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let kind = field("/kind");
    match (field("/metadata/namespace"), field("/metadata/name")) {
        ("", name) => format!("{kind} {name}"),
        (ns, name) => format!("{kind} {ns}/{name}"),
    }
}

/// Removes and parses the saved storage-version fields, if the object carries them.
fn take_saved(object: &mut Value) -> Option<Value> {
    let annotations = object.pointer_mut("/metadata/annotations")?.as_object_mut()?;
    let saved = annotations.remove(CONVERSION_DATA)?;
    if annotations.is_empty()
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    serde_json::from_str(saved.as_str()?).ok()
}

/// One object's conversion through the definition's templates.
struct Converter<'a> {
    def: &'a CompiledDefinition,
    id: String,
}

impl Converter<'_> {
    /// A spoke object (of `version`) as the storage version holds it, with any field the
    /// spoke could not hold restored from its annotation.
    fn up(&self, object: &Value, version: &CrdVersion) -> Result<Value, ConvertError> {
        let mut hub = self.step(object, version, true)?;
        let Some(saved) = take_saved(&mut hub) else {
            return Ok(hub);
        };
        // What the spoke looked like when it was saved, brought back up: fields that
        // differ between it and the saved ones are what the spoke could not hold.
        let mut saved_hub = hub.clone();
        for section in ["spec", "status"] {
            set(&mut saved_hub, section, saved.get(section).cloned());
        }
        let base = self.step(&self.step(&saved_hub, version, false)?, version, true)?;
        for section in ["spec", "status"] {
            let restored = lossless::restore(saved.get(section), base.get(section), hub.get(section));
            set(&mut hub, section, restored);
        }
        Ok(hub)
    }

    /// A storage-version object converted down to `version`, annotated with what that
    /// version cannot hold.
    fn down(&self, hub: &Value, version: &CrdVersion) -> Result<Value, ConvertError> {
        let mut spoke = self.step(hub, version, false)?;
        let back = self.step(&spoke, version, true)?;
        let lossy = ["spec", "status"].iter().any(|s| back.get(s) != hub.get(s));
        if lossy {
            let saved: Map<String, Value> = ["spec", "status"]
                .iter()
                .filter_map(|k| hub.get(*k).map(|v| ((*k).to_string(), v.clone())))
                .collect();
            let saved = Value::Object(saved);
            let meta = spoke
                .as_object_mut()
                .and_then(|o| o.get_mut("metadata"))
                .and_then(Value::as_object_mut);
            if let Some(meta) = meta {
                let annotations = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
                if let Some(a) = annotations.as_object_mut() {
                    a.insert(CONVERSION_DATA.into(), Value::String(saved.to_string()));
                }
            }
        }
        Ok(spoke)
    }

    /// One step between `version` and the storage version: up (`to_storage`) or down. A
    /// version without templates shares the storage schema: only its apiVersion changes.
    fn step(&self, object: &Value, version: &CrdVersion, to_storage: bool) -> Result<Value, ConvertError> {
        let group = &self.def.parent.group;
        let target = if to_storage {
            self.def.storage_version().unwrap_or_default()
        } else {
            version.name.as_str()
        };
        let mut out = object.clone();
        out["apiVersion"] = Value::String(format!("{group}/{target}"));
        let Some(conversion) = &version.conversion else {
            return Ok(out);
        };
        let (name, source) = if to_storage {
            (crate::compile::names::to_storage(&version.name), &conversion.to_storage)
        } else {
            (
                crate::compile::names::from_storage(&version.name),
                &conversion.from_storage,
            )
        };
        let ctx = JinjaValue::from(Serde(json!({"object": object})));
        let text = crate::render::render_named(self.def, object, &name, source, &ctx).map_err(|source| {
            ConvertError::Template {
                object: self.id.clone(),
                source: Box::new(source),
            }
        })?;
        let output = |message: String| ConvertError::Output {
            object: self.id.clone(),
            location: self
                .def
                .origin(&name)
                .map_or_else(|| self.def.source.clone(), |o| format!("{}:{}", o.file, o.line)),
            template: name.clone(),
            message,
        };
        let rendered: Value =
            crate::yaml::document(&text).map_err(|e| output(format!("the rendered output is not valid YAML: {e}")))?;
        let rendered = match rendered {
            Value::Null => Map::new(),
            Value::Object(m) => m,
            other => return Err(output(format!("renders {other}, not a mapping with spec and status"))),
        };
        if let Some(key) = rendered.keys().find(|k| *k != "spec" && *k != "status") {
            return Err(output(format!(
                "renders `{key}`; a conversion renders only spec and status (Stencil carries metadata over)"
            )));
        }
        set(&mut out, "spec", rendered.get("spec").cloned().filter(|v| !v.is_null()));
        if let Some(status) = rendered.get("status") {
            set(&mut out, "status", Some(status.clone()).filter(|v| !v.is_null()));
        }
        // What the template made must be what the target version admits, checked as the
        // API server would check it (after its defaults).
        if let Some((_, schema)) = crate::structural::schema_of(self.def, &out) {
            let mut admitted = out.clone();
            crate::structural::apply_defaults(schema, &mut admitted);
            let problems = crate::structural::violations(schema, &admitted);
            if !problems.is_empty() {
                return Err(ConvertError::Invalid {
                    object: self.id.clone(),
                    version: target.to_string(),
                    location: self
                        .def
                        .origin(&name)
                        .map_or_else(|| self.def.source.clone(), |o| format!("{}:{}", o.file, o.line)),
                    template: name.clone(),
                    problems: problems.join("; "),
                });
            }
        }
        Ok(out)
    }
}

/// Sets or removes a top-level field of an object.
fn set(object: &mut Value, key: &str, value: Option<Value>) {
    if let Some(o) = object.as_object_mut() {
        match value {
            Some(v) => {
                o.insert(key.to_string(), v);
            }
            None => {
                o.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests;
