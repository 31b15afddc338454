//! Command-line arguments of the `stencil` binary.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Stencil: a generic Kubernetes operator driven by OperatorDefinitions.
#[derive(Debug, Parser)]
#[command(name = "stencil", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller: serve every definition from the cluster and from --definitions.
    Run(RunArgs),
    /// Render the children and status of one parent, offline.
    Render(RenderArgs),
    /// Check definition files; prints `file:line:col: message` per error.
    Validate {
        /// Files or directories of definitions.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Run golden cases (`*.case.yaml` beside `*.expected.yaml`).
    Test {
        /// Directories (or case files) to run.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Rewrite the expected files from the current output.
        #[arg(long)]
        update: bool,
    },
    /// Print CRDs: Stencil's own, or with --definitions the parents' CRDs they declare.
    Crd {
        /// Definition files or directories whose `spec.crd` to print.
        #[arg(long = "definitions")]
        definitions: Vec<PathBuf>,
    },
    /// Print the least-privilege ClusterRole (and Roles) Stencil needs for definitions.
    Rbac(RbacArgs),
}

/// Arguments of `stencil render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The definition file.
    #[arg(long)]
    pub definition: PathBuf,
    /// The definition's name, when the file holds several.
    #[arg(long)]
    pub name: Option<String>,
    /// The parent object (YAML).
    #[arg(long)]
    pub parent: PathBuf,
    /// Observed children (YAML stream); each carries the `stencil.dev/child` label.
    #[arg(long)]
    pub observed: Vec<PathBuf>,
    /// Objects the lookups read (YAML stream).
    #[arg(long)]
    pub lookups: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// Output formats of `stencil render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The desired children as a YAML stream.
    Yaml,
    /// `{"children": [...], "status": {...}, "waiting": [...]}`.
    Json,
}

/// Arguments of `stencil run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Files or directories of definitions, watched and reloaded on change (repeatable).
    #[arg(long = "definitions")]
    pub definitions: Vec<PathBuf>,
    /// Serve only parents (and watch only namespaced objects) in these namespaces
    /// (repeatable; default: every namespace).
    #[arg(long = "namespace")]
    pub namespaces: Vec<String>,
    /// Parents reconciled at once per definition.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Ignore OperatorDefinition resources; serve only --definitions.
    #[arg(long)]
    pub no_cluster_definitions: bool,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: std::net::SocketAddr,
    /// Reconcile only while holding a Lease; other replicas wait as warm standbys.
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: $POD_NAMESPACE, else `default`).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = "stencil")]
    pub leader_election_id: String,
    /// How long the Lease is valid without renewal.
    #[arg(long, default_value = "15s", value_parser = seconds)]
    pub lease_duration: std::time::Duration,
    /// How long the leader keeps writing without a renewal; shorter than the Lease
    /// duration, so it has stopped before a standby may take over.
    #[arg(long, default_value = "10s", value_parser = seconds)]
    pub renew_deadline: std::time::Duration,
    /// How often the leader renews the Lease.
    #[arg(long, default_value = "2s", value_parser = seconds)]
    pub retry_period: std::time::Duration,
    /// How long a watch's first list may take before the definition reports it.
    #[arg(long, default_value = "10s", value_parser = seconds)]
    pub sync_timeout: std::time::Duration,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Log formats of `stencil run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses whole seconds written `15s` or `15`.
fn seconds(text: &str) -> Result<std::time::Duration, String> {
    let digits = text.strip_suffix('s').unwrap_or(text);
    digits
        .parse::<u64>()
        .ok()
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is not a positive number of seconds, e.g. 15s"))
}

/// Arguments of `stencil rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// Definition files or directories (repeatable).
    #[arg(long = "definitions", required = true)]
    pub definitions: Vec<PathBuf>,
    /// Confine namespaced kinds to Roles in these namespaces (repeatable).
    #[arg(long = "namespace")]
    pub namespaces: Vec<String>,
    /// Include Leases for leader election.
    #[arg(long)]
    pub leader_elect: bool,
    /// Leave out OperatorDefinition access (for `stencil run --no-cluster-definitions`).
    #[arg(long)]
    pub no_cluster_definitions: bool,
    /// Name of the generated roles.
    #[arg(long, default_value = "stencil")]
    pub name: String,
    /// Also bind the roles to this ServiceAccount, written `namespace/name`.
    #[arg(long)]
    pub service_account: Option<String>,
    /// `manifests` (ClusterRole and Roles) or `values` (rules for the Helm chart's
    /// `rbac.clusterRules` and `rbac.namespacedRules`).
    #[arg(long, value_enum, default_value_t = RbacFormat::Manifests)]
    pub format: RbacFormat,
}

/// Output formats of `stencil rbac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RbacFormat {
    /// Kubernetes manifests.
    Manifests,
    /// Helm values for charts/stencil.
    Values,
}
