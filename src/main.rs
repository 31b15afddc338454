//! The `stencil` binary: parses arguments and calls the library. The only module that
//! uses anyhow.

mod cli;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde_json::Value;

use cli::{Cli, Command, Format, LogFormat, RbacArgs, RbacFormat, RenderArgs, RunArgs};
use stencil::golden::{self, Outcome};
use stencil::source::files;
use stencil::{crd, yaml};

/// Exit code for a failed check (validation errors, failed golden cases).
const FAILED: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Run(args) = cli.command {
        return match run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::from(FAILED)
            }
        };
    }
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(FAILED)
        }
    }
}

fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(_) => unreachable!("handled in main"),
        Command::Rbac(args) => rbac_cmd(&args),
        Command::Validate { paths } => validate(&paths),
        Command::Render(args) => render_cmd(&args),
        Command::Test { paths, update } => test(&paths, update),
        Command::Crd { definitions } => crd_cmd(&definitions),
    }
}

fn validate(paths: &[PathBuf]) -> Result<ExitCode> {
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

fn render_cmd(args: &RenderArgs) -> Result<ExitCode> {
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
    let observed = golden::observed_by_child(observed).map_err(anyhow::Error::msg)?;
    let out = golden::render_offline(def, &loaded.definitions, &parent, &observed, &lookup_objects)?;
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out.to_json())?),
        Format::Yaml => {
            let objects: Vec<Value> = out.children.iter().map(|c| c.object.clone()).collect();
            print!("{}", yaml::to_stream(&objects)?);
            for w in &out.waiting {
                eprintln!("waiting: {} (on {})", w.child, w.on.join(", "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn test(paths: &[PathBuf], update: bool) -> Result<ExitCode> {
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

fn crd_cmd(definitions: &[PathBuf]) -> Result<ExitCode> {
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

/// `stencil run`: logs, then the library's runtime until a signal.
#[tokio::main]
async fn run(args: RunArgs) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match args.log_format {
        LogFormat::Json => logs.json().flatten_event(true).with_current_span(true).init(),
        LogFormat::Text => logs.init(),
    }
    let config = kube::Config::infer()
        .await
        .context("finding the cluster's configuration")?;
    let leader = args.leader_elect.then(|| stencil::leader::Settings {
        namespace: args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "default".into()),
        name: args.leader_election_id.clone(),
        identity: std::env::var("POD_NAME").unwrap_or_else(|_| format!("stencil-{:08x}", rand::random::<u32>())),
        lease_duration: args.lease_duration,
        renew_deadline: args.renew_deadline,
        retry_period: args.retry_period,
    });
    let options = stencil::runtime::Options {
        definitions: args.definitions,
        cluster_definitions: !args.no_cluster_definitions,
        namespaces: args.namespaces,
        concurrency: args.concurrency,
        metrics_addr: Some(args.metrics_addr),
        leader,
        sync_timeout: args.sync_timeout,
    };
    stencil::runtime::Runtime::new(config, options)
        .run(shutdown_signal())
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn rbac_cmd(args: &RbacArgs) -> Result<ExitCode> {
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
