//! The `stencil` binary: parses arguments and calls the library (`stencil run` through
//! [`stencil::runtime`], the offline subcommands through `commands`). With `commands`,
//! the only place that uses anyhow.

mod cli;
mod commands;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use cli::{Cli, Command, ImportFrom, LogFormat, RunArgs, SchemaRewrite};
use commands::FAILED;
use commands::schema::Rewrite;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Run(args) = cli.command {
        return match run(*args) {
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
        Command::Rbac(args) => commands::rbac(&args),
        Command::Validate { paths } => commands::validate(&paths),
        Command::Render(args) => commands::render(&args),
        Command::Test { paths, update } => commands::test(&paths, update),
        Command::Crd { definitions, compat } => commands::crd(&definitions, compat),
        Command::Schema { rewrite: None, format } => commands::schema::print(format),
        Command::Schema {
            rewrite: Some(SchemaRewrite::Compact { paths }),
            ..
        } => commands::schema::rewrite(&paths, Rewrite::Compact),
        Command::Schema {
            rewrite: Some(SchemaRewrite::Expand { paths }),
            ..
        } => commands::schema::rewrite(&paths, Rewrite::Expand),
        Command::Import {
            from: ImportFrom::Kro { files, output },
        } => commands::import::kro(&files, output.as_deref()),
        Command::New(args) => commands::new(&args),
        Command::Diff(args) => Ok(commands::diff(&args)),
        Command::Convert(args) => commands::convert(&args),
        Command::Argocd { definitions } => commands::argocd(&definitions),
        Command::Rollout { action } => commands::rollout::run(&action),
        Command::CommandsPage => {
            print!("{}", cli::reference::page());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `stencil run` on a runtime whose blocking pool (where renders run) has two threads per
/// core: renders are CPU-bound, so more threads would not render faster, and each thread
/// that allocates gets an allocator arena of its own that stays in the RSS.
fn run(args: RunArgs) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(2 * cores)
        .build()
        .context("starting the async runtime")?
        .block_on(serve(args))
}

/// `stencil run`: logs, then the library's runtime until a signal.
async fn serve(args: RunArgs) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match args.log_format {
        LogFormat::Json => logs.json().flatten_event(true).with_current_span(true).init(),
        LogFormat::Text => logs.init(),
    }
    let config = kube::Config::infer()
        .await
        .context("finding the cluster's configuration")?;
    let leader = (args.leader_elect || args.sharding).then(|| stencil::leader::Settings {
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
    let namespace = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "default".into());
    let endpoint = match (&args.webhook_service, &args.webhook_url) {
        (Some((namespace, name)), _) => Some(stencil::crd::Endpoint::Service {
            namespace: namespace.clone(),
            name: name.clone(),
        }),
        (None, Some(url)) => Some(stencil::crd::Endpoint::Url(url.clone())),
        (None, None) => None,
    };
    let webhook = endpoint.map(|endpoint| stencil::webhook::Settings {
        addr: args.webhook_addr,
        endpoint,
        certs: match &args.webhook_cert_dir {
            Some(dir) => stencil::webhook::CertSource::Dir(dir.clone()),
            None => stencil::webhook::CertSource::Secret {
                namespace: namespace.clone(),
                name: args.webhook_secret.clone(),
            },
        },
    });
    let options = stencil::runtime::Options {
        definitions: args.definitions,
        cluster_definitions: !args.no_cluster_definitions,
        definition_selector: args.definition_selector,
        namespaces: args.namespaces,
        concurrency: args.concurrency,
        metrics_addr: Some(args.metrics_addr),
        leader,
        sync_timeout: args.sync_timeout,
        webhook,
        storage_migration: args.storage_migration,
        instance: std::env::var("POD_NAME").ok(),
        sharding: args.sharding,
        home: Some(namespace),
        compat_metacontroller: args.compat.contains(&cli::Compat::Metacontroller),
        hook_overrides: args.resolve.into_iter().collect(),
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
