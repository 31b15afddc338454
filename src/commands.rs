//! The subcommands other than `run` (`validate`, `render`, `test`, `crd`, `rbac`,
//! `schema`, `argocd`, `new`, `diff`): each reads its inputs (files, or the cluster for
//! `diff` and `render --from-cluster`, which never write), calls the library, prints,
//! and returns the exit code.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cli::{DiffArgs, DiffFormat, Format, NewArgs, RbacArgs, RbacFormat, RenderArgs, Scope};
use futures::StreamExt as _;
use stencil::definition::CrdScope;
use stencil::golden::{self, Outcome};
use stencil::source::files;
use stencil::{crd, live, yaml};

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
    let loaded = load_valid(std::slice::from_ref(&args.definition))?;
    let def = golden::pick(
        &loaded.definitions,
        args.name.as_deref(),
        &args.definition.display().to_string(),
    )
    .map_err(anyhow::Error::msg)?;
    let out = match (&args.from_cluster, &args.parent) {
        (Some(target), _) => block_on(from_cluster(def, target, args.namespace.as_deref()))??,
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
            let observed = golden::split_observed(observed, &parent);
            golden::render_offline(def, &loaded.definitions, &parent, &observed, &lookup_objects)?
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

/// Runs a future on a runtime of its own: the offline commands that read the cluster
/// are the only async ones.
fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(future))
}

/// Whether `target`'s kind (`Database`, `database` or `databases`) names the parent kind.
fn names_parent_kind(def: &stencil::compile::CompiledDefinition, kind: &str) -> bool {
    let own = &def.parent.kind;
    kind.eq_ignore_ascii_case(own)
        || def
            .spec
            .crd
            .as_ref()
            .is_some_and(|c| c.names.plural == kind || c.names.short_names.iter().any(|s| s == kind))
        || kind.eq_ignore_ascii_case(&stencil::scaffold::plural(own))
}

/// `stencil render --from-cluster`: the parent, its children (by the parent-UID label)
/// and its lookups, read from the cluster and rendered as the controller would.
async fn from_cluster(
    def: &stencil::compile::CompiledDefinition,
    target: &str,
    namespace: Option<&str>,
) -> Result<stencil::render::RenderOutput> {
    let (kind, name) = target
        .split_once('/')
        .with_context(|| format!("--from-cluster `{target}` must be written KIND/NAME"))?;
    if !names_parent_kind(def, kind) {
        bail!(
            "--from-cluster names kind `{kind}`, but definition {} reconciles {}",
            def.name,
            def.parent.kind
        );
    }
    let client = kube::Client::try_default().await.context("connecting to the cluster")?;
    let kinds = live::Kinds::resolve(&client, def).await?;
    // As kubectl does: a namespaced parent without -n is in the kubeconfig's namespace.
    let namespace = namespace.unwrap_or(client.default_namespace()).to_string();
    let parent = kinds
        .parents(&client, Some(&namespace))
        .get_opt(name)
        .await
        .with_context(|| format!("reading {} {name}", def.parent.kind))?
        .with_context(|| format!("{} {name} does not exist", def.parent.kind))?;
    let parent = live::to_value(parent, &kinds.parent.resource);
    let uid = parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut children = kinds
        .children(&client, &format!("{}={uid}", stencil::labels::PARENT_UID))
        .await?;
    let children = children.remove(&uid).unwrap_or_default();
    let snapshot = live::Snapshot::read(&client, def, &kinds, parent, children).await??;
    Ok(snapshot.render(def, &kinds.scopes)?)
}

/// Parents compared at once by `stencil diff`.
const DIFF_CONCURRENCY: usize = 16;

/// `stencil diff`, with kubectl diff's exit codes: 0 no change, 1 changes, 2 an error.
pub fn diff(args: &DiffArgs) -> ExitCode {
    match block_on(diff_parents(args)).and_then(|r| r) {
        Ok(diffs) => {
            let summary = live::diff::Summary::of(&diffs);
            match args.output {
                DiffFormat::Json => {
                    let report = serde_json::json!({"parents": diffs, "summary": summary});
                    println!("{report:#}");
                }
                DiffFormat::Text => print!("{}", live::diff::text(&diffs)),
            }
            if summary.errors > 0 {
                ExitCode::from(DIFF_ERROR)
            } else if summary.changes() {
                ExitCode::from(FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(DIFF_ERROR)
        }
    }
}

/// Exit code of `stencil diff` when it could not compare.
const DIFF_ERROR: u8 = 2;

async fn diff_parents(args: &DiffArgs) -> Result<Vec<live::diff::ParentDiff>> {
    let loaded = load_valid(std::slice::from_ref(&args.definition))?;
    let def = golden::pick(
        &loaded.definitions,
        args.name.as_deref(),
        &args.definition.display().to_string(),
    )
    .map_err(anyhow::Error::msg)?;
    let client = kube::Client::try_default().await.context("connecting to the cluster")?;
    let kinds = live::Kinds::resolve(&client, def).await?;
    let mut params = kube::api::ListParams::default();
    if let Some(selector) = &args.selector {
        params = params.labels(selector);
    }
    let mut parents = Vec::new();
    let namespaces: Vec<Option<&str>> = if args.namespaces.is_empty() {
        vec![None]
    } else {
        args.namespaces.iter().map(|n| Some(n.as_str())).collect()
    };
    for ns in namespaces {
        let list = kinds
            .parents(&client, ns)
            .list(&params)
            .await
            .with_context(|| format!("listing {} parents", def.parent.kind))?;
        parents.extend(
            list.items
                .into_iter()
                .map(|p| live::to_value(p, &kinds.parent.resource)),
        );
    }
    let selector = format!("{}={}", stencil::labels::MANAGED_BY, stencil::labels::MANAGED_BY_VALUE);
    let children = kinds.children(&client, &selector).await?;
    let progress = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(parents.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let compared = futures::stream::iter(parents)
        .map(|parent| {
            let uid = parent
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let own = children.get(uid).cloned().unwrap_or_default();
            let (client, kinds, progress) = (&client, &kinds, &progress);
            async move {
                let diff = live::diff::parent(client, def, kinds, parent, own).await;
                progress.inc(1);
                diff
            }
        })
        .buffer_unordered(DIFF_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    progress.finish_and_clear();
    let mut diffs = compared.into_iter().collect::<Result<Vec<_>, _>>()?;
    diffs.sort_by(|a, b| a.parent.cmp(&b.parent));
    Ok(diffs)
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

pub fn schema() -> Result<ExitCode> {
    println!("{:#}", stencil::json_schema::definition_schema());
    Ok(ExitCode::SUCCESS)
}

pub fn new(args: &NewArgs) -> Result<ExitCode> {
    let request = stencil::scaffold::Request {
        kind: args.kind.clone(),
        group: args.group.clone(),
        version: args.version.clone(),
        scope: match args.scope {
            Scope::Namespaced => CrdScope::Namespaced,
            Scope::Cluster => CrdScope::Cluster,
        },
    };
    let files = stencil::scaffold::scaffold(&request)?;
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
    print!(
        "{}",
        yaml::to_string(&stencil::argocd::customizations(&loaded.definitions))?
    );
    Ok(ExitCode::SUCCESS)
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

pub fn crd(definitions: &[PathBuf]) -> Result<ExitCode> {
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
        if let Some(c) = crd::parent_crd(def)? {
            crds.push(serde_json::to_value(c)?);
        }
    }
    print!("{}", yaml::to_stream(&crds)?);
    Ok(ExitCode::SUCCESS)
}

pub fn rbac(args: &RbacArgs) -> Result<ExitCode> {
    let loaded = load_valid(&args.definitions)?;
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
