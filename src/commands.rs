//! The offline subcommands (`validate`, `render`, `test`, `crd`, `rbac`): each reads its
//! inputs, calls the library, prints, and returns the exit code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cli::{Format, RbacArgs, RbacFormat, RenderArgs};
use stencil::golden::{self, Outcome};
use stencil::source::files;
use stencil::{crd, yaml};

/// Exit code for a failed check (validation errors, failed golden cases).
pub const FAILED: u8 = 1;

pub fn validate(paths: &[PathBuf]) -> Result<ExitCode> {
    let loaded = files::load(paths)?;
    for d in &loaded.diagnostics {
        println!("{d}");
    }
    if loaded.diagnostics.is_empty() {
        eprintln!("ok: {} definitions in {} files", loaded.definitions.len(), loaded.files);
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{} errors in {} files", loaded.diagnostics.len(), loaded.files);
        Ok(ExitCode::from(FAILED))
    }
}

fn read_yaml_stream(path: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    yaml::documents(&text).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))
}

pub fn render(args: &RenderArgs) -> Result<ExitCode> {
    let loaded = files::load(std::slice::from_ref(&args.definition))?;
    if !loaded.diagnostics.is_empty() {
        let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        bail!("{}", lines.join("\n"));
    }
    let def = golden::pick(
        &loaded.definitions,
        args.name.as_deref(),
        &args.definition.display().to_string(),
    )
    .map_err(anyhow::Error::msg)?;
    let mut parents = read_yaml_stream(&args.parent)?;
    if parents.len() != 1 {
        bail!(
            "{}: expected one parent object, found {}",
            args.parent.display(),
            parents.len()
        );
    }
    let parent = parents.remove(0);
    let mut observed = Vec::new();
    for path in &args.observed {
        observed.extend(read_yaml_stream(path)?);
    }
    let mut lookup_objects = Vec::new();
    for path in &args.lookups {
        lookup_objects.extend(read_yaml_stream(path)?);
    }
    let observed = golden::split_observed(observed, &parent);
    let out = golden::render_offline(def, &loaded.definitions, &parent, &observed, &lookup_objects)?;
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out.to_json())?),
        Format::Yaml => {
            let objects: Vec<Value> = out.children.iter().map(|c| c.object.clone()).collect();
            print!("{}", yaml::to_stream(&objects)?);
            for w in &out.waiting {
                eprintln!("waiting: {} (on {})", w.child, w.on.join(", "));
            }
            for c in &out.conflicts {
                eprintln!("conflict: {c}");
            }
            for a in &out.adoptions {
                eprintln!("adopt: {a}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn test(paths: &[PathBuf], update: bool) -> Result<ExitCode> {
    let mut cases = Vec::new();
    for path in paths {
        cases.extend(golden::find_cases(path)?);
    }
    if cases.is_empty() {
        bail!(
            "no *.case.yaml files under {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let (mut passed, mut failed) = (0, 0);
    for case in &cases {
        match golden::run_case(case, update) {
            Ok(Outcome::Passed) => {
                passed += 1;
                println!("ok      {}", case.display());
            }
            Ok(Outcome::Updated) => {
                passed += 1;
                println!("updated {}", golden::expected_path(case).display());
            }
            Ok(Outcome::Failed(diff)) => {
                failed += 1;
                println!("FAILED  {}\n{diff}", case.display());
            }
            Err(e) => {
                failed += 1;
                println!("FAILED  {}\n{e}", case.display());
            }
        }
    }
    println!("golden: {passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FAILED)
    })
}

pub fn crd(definitions: &[PathBuf]) -> Result<ExitCode> {
    if definitions.is_empty() {
        print!(
            "{}",
            yaml::to_stream(&[serde_json::to_value(crd::operator_definition_crd())?])?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let loaded = files::load(definitions)?;
    if !loaded.diagnostics.is_empty() {
        let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        bail!("{}", lines.join("\n"));
    }
    let mut crds = Vec::new();
    for def in &loaded.definitions {
        if let Some(c) = crd::parent_crd(def)? {
            crds.push(serde_json::to_value(c)?);
        }
    }
    print!("{}", yaml::to_stream(&crds)?);
    Ok(ExitCode::SUCCESS)
}

pub fn rbac(args: &RbacArgs) -> Result<ExitCode> {
    let loaded = files::load(&args.definitions)?;
    if !loaded.diagnostics.is_empty() {
        let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        bail!("{}", lines.join("\n"));
    }
    let options = stencil::rbac::Options {
        namespaces: args.namespaces.clone(),
        leader_election: args.leader_elect,
        cluster_definitions: !args.no_cluster_definitions,
        name: args.name.clone(),
    };
    let scopes = stencil::compile::scopes(&loaded.definitions);
    let needs = stencil::rbac::needs(&loaded.definitions, &scopes, &options);
    if args.format == RbacFormat::Values {
        let values = serde_json::json!({"rbac": {
            "clusterRules": needs.cluster.policy_rules(),
            "namespacedRules": needs.namespaced.policy_rules(),
        }});
        print!("{}", yaml::to_string(&values)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut objects = stencil::rbac::manifests(&needs, &options);
    if let Some(sa) = &args.service_account {
        let (ns, name) = sa
            .split_once('/')
            .with_context(|| format!("--service-account `{sa}` must be written namespace/name"))?;
        objects.extend(stencil::rbac::bindings(&objects, ns, name));
    }
    print!("{}", yaml::to_stream(&objects)?);
    Ok(ExitCode::SUCCESS)
}
