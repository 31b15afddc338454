//! The subcommands other than `run` (`validate`, `render`, `test`, `crd`, `rbac`,
//! `schema` and its rewrites, `argocd`, `new`, `diff`, `convert`, `import`): each reads its inputs (files, or the cluster for
//! `diff` and `render --from-cluster`, which never write), calls the library or the
//! commands' own modules (the golden runner, scaffolding, RBAC derivation, Argo CD
//! health), prints, and returns the exit code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cli::{Compat, ConvertArgs, Format, NewArgs, RbacArgs, RbacFormat, RenderArgs, Scope};
use golden::Outcome;
use stencil::definition::CrdScope;
use stencil::offline::{self, Admission};
use stencil::source::files;
use stencil::{crd, yaml};

mod argocd;
mod cluster;
mod golden;
pub mod import;
mod rbac;
pub mod rollout;
mod scaffold;
pub mod schema;
pub use cluster::diff;

/// Exit code for a failed check (validation errors, failed golden cases).
pub const FAILED: u8 = 1;

pub fn validate(paths: &[PathBuf]) -> Result<ExitCode> {
    let loaded = files::load(paths)?;
    for d in &loaded.diagnostics {
        println!("{d}");
    }
    for hint in loaded.definitions.iter().flat_map(|d| d.hints()) {
        eprintln!("{hint}");
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
    let (loaded, def) = load_one(&args.definition, args.name.as_deref())?;
    let def = &def;
    let out = match (&args.from_cluster, &args.parent) {
        (Some(target), _) => cluster::block_on(cluster::from_cluster(def, target, args.namespace.as_deref()))??,
        (None, Some(parent_file)) => {
            let mut parents = read_yaml_stream(parent_file)?;
            if parents.len() != 1 {
                bail!(
                    "{}: expected one parent object, found {}",
                    parent_file.display(),
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
            let observed = offline::split_observed(observed, &parent);
            let scopes = stencil::compile::scopes(&loaded.definitions);
            offline::render_offline(def, &scopes, &parent, &observed, &lookup_objects, Admission::Admit)?
        }
        (None, None) => bail!("give --parent FILE or --from-cluster KIND/NAME"),
    };
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

pub fn new(args: &NewArgs) -> Result<ExitCode> {
    let request = scaffold::Request {
        kind: args.kind.clone(),
        group: args.group.clone(),
        version: args.version.clone(),
        scope: match args.scope {
            Scope::Namespaced => CrdScope::Namespaced,
            Scope::Cluster => CrdScope::Cluster,
        },
    };
    let files = scaffold::scaffold(&request)?;
    let taken: Vec<String> = files
        .iter()
        .map(|f| args.dir.join(&f.path))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !taken.is_empty() {
        bail!("refusing to overwrite {}", taken.join(", "));
    }
    for f in &files {
        let path = args.dir.join(&f.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, &f.text).with_context(|| format!("writing {}", path.display()))?;
        println!("created {}", path.display());
    }
    let case = args.dir.join("tests/example.case.yaml");
    golden::run_case(&case, true).map_err(|e| anyhow::anyhow!("{}: {e}", case.display()))?;
    println!("created {}", args.dir.join("tests/example.expected.yaml").display());
    Ok(ExitCode::SUCCESS)
}

pub fn argocd(definitions: &[PathBuf]) -> Result<ExitCode> {
    let loaded = load_valid(definitions)?;
    println!("# Add to the data of the argocd-cm ConfigMap (or the Argo CD chart's configs.cm):");
    print!("{}", yaml::to_string(&argocd::customizations(&loaded.definitions))?);
    Ok(ExitCode::SUCCESS)
}

/// Loads one definition file and picks the definition `name` (or its only one).
fn load_one(path: &Path, name: Option<&str>) -> Result<(files::Loaded, stencil::compile::CompiledDefinition)> {
    let loaded = load_valid(&[path.to_path_buf()])?;
    let def = golden::pick(&loaded.definitions, name, &path.display().to_string())
        .map_err(anyhow::Error::msg)?
        .clone();
    Ok((loaded, def))
}

/// Loads definition files, failing with every diagnostic when one does not compile.
fn load_valid(paths: &[PathBuf]) -> Result<files::Loaded> {
    let loaded = files::load(paths)?;
    if !loaded.diagnostics.is_empty() {
        let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        bail!("{}", lines.join("\n"));
    }
    Ok(loaded)
}

/// `stencil convert`: each object converted to `--to`, and checked to come back whole.
pub fn convert(args: &ConvertArgs) -> Result<ExitCode> {
    let (_, def) = load_one(&args.definition, args.name.as_deref())?;
    let objects = if args.objects.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).context("reading stdin")?;
        yaml::documents::<Value>(&text).map_err(|e| anyhow::anyhow!("<stdin>:{e}"))?
    } else {
        read_yaml_stream(&args.objects)?
    };
    let mut converted = Vec::new();
    let mut lossy = false;
    for object in &objects {
        let (out, lost) = golden::round_trip(&def, object, &args.to)?;
        if !lost.is_empty() {
            lossy = true;
            eprintln!("lost: converting back from {} loses {}", args.to, lost.join(", "));
        }
        converted.push(out);
    }
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&converted)?),
        Format::Yaml => print!("{}", yaml::to_stream(&converted)?),
    }
    Ok(if lossy { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

pub fn crd(definitions: &[PathBuf], compat: Option<Compat>) -> Result<ExitCode> {
    if compat == Some(Compat::Metacontroller) {
        let crds: Vec<_> = stencil::metacontroller::crds()
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        print!("{}", yaml::to_stream(&crds)?);
        return Ok(ExitCode::SUCCESS);
    }
    if definitions.is_empty() {
        print!(
            "{}",
            yaml::to_stream(&[serde_json::to_value(crd::operator_definition_crd())?])?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let loaded = load_valid(definitions)?;
    let mut crds = Vec::new();
    for def in &loaded.definitions {
        if let Some(c) = crd::parent_crd(def, None)? {
            crds.push(serde_json::to_value(c)?);
        }
    }
    print!("{}", yaml::to_stream(&crds)?);
    Ok(ExitCode::SUCCESS)
}

pub fn rbac(args: &RbacArgs) -> Result<ExitCode> {
    let definitions = if args.definitions.is_empty() {
        Vec::new()
    } else {
        load_valid(&args.definitions)?.definitions
    };
    let options = rbac::Options {
        namespaces: args.namespaces.clone(),
        leader_election: args.leader_elect || args.sharding,
        sharding: args.sharding,
        cluster_definitions: !args.no_cluster_definitions,
        name: args.name.clone(),
        home: args
            .stencil_namespace
            .clone()
            .or_else(|| {
                args.service_account
                    .as_ref()?
                    .split_once('/')
                    .map(|(ns, _)| ns.to_string())
            })
            .unwrap_or_else(|| "default".into()),
    };
    let scopes = stencil::compile::scopes(&definitions);
    let mut needs = rbac::needs(&definitions, &scopes, &options);
    for path in &args.controllers {
        let objects = read_yaml_stream(path)?;
        let notes = rbac::compat::controllers(&objects, &mut needs.cluster)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        needs.notes.extend(notes);
    }
    // What an admin must add by hand is said on stderr and, so it travels with the
    // manifests, as comments at their top.
    for note in &needs.notes {
        eprintln!("note: {note}");
        println!("# note: {note}");
    }
    if args.format == RbacFormat::Values {
        let values = serde_json::json!({"rbac": {
            "clusterRules": needs.cluster.policy_rules(),
            "namespacedRules": needs.namespaced.policy_rules(),
        }});
        print!("{}", yaml::to_string(&values)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut objects = rbac::manifests(&needs, &options);
    if let Some(sa) = &args.service_account {
        let (ns, name) = sa
            .split_once('/')
            .with_context(|| format!("--service-account `{sa}` must be written namespace/name"))?;
        objects.extend(rbac::bindings(&objects, ns, name));
    }
    print!("{}", yaml::to_stream(&objects)?);
    Ok(ExitCode::SUCCESS)
}
