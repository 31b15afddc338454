//! `stencil schema`: the editor's JSON Schema of a definition file, and the rewrites of a
//! definition's CRD schemas between OpenAPI and the compact form (`compact`, `expand`).
//! A rewrite checks the files first (as `stencil validate` does), prints the rewritten
//! definitions as a YAML stream (comments are not kept) and never writes a file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::Value;

use stencil::compact_schema::{self, Compact, Written};
use stencil::definition::{CrdSchema, OperatorDefinition};
use stencil::source::files;
use stencil::yaml;

use super::FAILED;
use crate::cli::SchemaFormat;

/// Which way a rewrite goes.
#[derive(Debug, Clone, Copy)]
pub enum Rewrite {
    /// OpenAPI to the compact form, where that loses nothing.
    Compact,
    /// The compact form to OpenAPI.
    Expand,
}

/// Prints the editor's JSON Schema, or the reference page made from it.
pub fn print(format: SchemaFormat) -> Result<ExitCode> {
    let schema = stencil::json_schema::definition_schema();
    match format {
        SchemaFormat::Json => println!("{schema:#}"),
        SchemaFormat::Markdown => print!("{}", stencil::schema_reference::reference_page(&schema)),
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the definitions of `paths` with their CRD schemas rewritten; says on stderr
/// which versions stay as they were and why.
pub fn rewrite(paths: &[PathBuf], way: Rewrite) -> Result<ExitCode> {
    let loaded = files::load(paths)?;
    if !loaded.diagnostics.is_empty() {
        for d in &loaded.diagnostics {
            println!("{d}");
        }
        return Ok(ExitCode::from(FAILED));
    }
    let mut out = Vec::new();
    let mut found = Vec::new();
    for path in paths {
        found.extend(files::yaml_files(path)?);
    }
    for path in found {
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        for mut def in yaml::documents::<OperatorDefinition>(&text)? {
            let name = def.metadata.name.clone().unwrap_or_default();
            for v in def.spec.crd.iter_mut().flat_map(|c| c.versions.iter_mut()) {
                if let Err(why) = rewrite_version(&mut v.schema, way) {
                    eprintln!("{}: {name}: version {} stays as written: {why}", path.display(), v.name);
                }
            }
            out.push(serde_json::to_value(&def)?);
        }
    }
    print!("{}", yaml::to_stream(&out)?);
    Ok(ExitCode::SUCCESS)
}

/// Rewrites one version's schema in place; a schema already in the target form is left.
fn rewrite_version(schema: &mut CrdSchema, way: Rewrite) -> Result<(), String> {
    match way {
        Rewrite::Expand if schema.is_compact() => {
            let compact = Compact {
                spec: schema.spec.as_ref(),
                status: schema.status.as_ref(),
                types: schema.types.as_ref(),
            };
            let expanded = compact_schema::expand(compact).map_err(|e| compact_schema::describe(&e))?;
            *schema = CrdSchema {
                open_api_v3_schema: expanded,
                ..CrdSchema::default()
            };
        }
        Rewrite::Compact if !schema.is_compact() => {
            let Written { spec, status, types } = compact_schema::compact(&schema.open_api_v3_schema)?;
            *schema = CrdSchema {
                open_api_v3_schema: Value::Null,
                spec,
                status,
                types,
            };
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled Database definition's CRD schema, expanded to OpenAPI.
    fn database_schema() -> CrdSchema {
        let text = include_str!("../../operators/database.yaml");
        let def: OperatorDefinition = yaml::document(text).unwrap();
        let mut schema = def.spec.crd.unwrap().versions.remove(0).schema;
        rewrite_version(&mut schema, Rewrite::Expand).unwrap();
        schema
    }

    #[test]
    fn compact_then_expand_gives_the_schema_back() {
        let original = database_schema();
        let mut schema = original.clone();
        rewrite_version(&mut schema, Rewrite::Compact).unwrap();
        assert!(schema.is_compact(), "the Database's schema has a compact form");
        assert_eq!(
            schema.spec.as_ref().unwrap()["replicas"],
            "integer | default=1 minimum=1 maximum=10"
        );
        rewrite_version(&mut schema, Rewrite::Expand).unwrap();
        assert_eq!(schema, original);
    }

    #[test]
    fn a_schema_the_compact_form_cannot_hold_stays_as_written() {
        let mut schema = database_schema();
        schema.open_api_v3_schema["properties"]["spec"]["properties"]["engine"]["format"] = "email".into();
        let before = schema.clone();
        let why = rewrite_version(&mut schema, Rewrite::Compact).unwrap_err();
        assert!(why.contains("spec.engine: `format`"), "{why}");
        assert_eq!(schema, before, "nothing half-rewritten");
    }
}
