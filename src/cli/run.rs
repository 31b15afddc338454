//! The arguments of `stencil run`, and the parsers of its values (seconds, a Service
//! reference, an https URL).

use std::path::PathBuf;

use clap::ValueEnum;

/// Arguments of `stencil run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Files or directories of definitions, watched and reloaded on change (repeatable).
    ///
    /// Files created, changed or deleted take effect within about 200 ms, without a
    /// restart; a ConfigMap volume works too (the kubelet's atomic `..data` swap is seen).
    #[arg(long = "definitions")]
    pub definitions: Vec<PathBuf>,
    /// Serve only parents (and watch only namespaced objects) in these namespaces
    /// (repeatable; default: every namespace).
    ///
    /// One namespace is watched on its own; several share one cluster-wide watch whose
    /// events are filtered.
    #[arg(long = "namespace")]
    pub namespaces: Vec<String>,
    /// Parents reconciled at once per definition.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Ignore OperatorDefinition resources; serve only --definitions.
    #[arg(long)]
    pub no_cluster_definitions: bool,
    /// Serve only the OperatorDefinition resources this label selector matches
    /// (`team=payments`), so several Stencil installations can share a cluster.
    ///
    /// A definition whose labels stop matching is removed (its parents released after the
    /// grace).
    #[arg(long)]
    pub definition_selector: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: std::net::SocketAddr,
    /// Reconcile only while holding a Lease; other replicas wait as warm standbys.
    #[arg(long)]
    pub leader_elect: bool,
    /// Split the parents between the replicas: each holds a membership Lease and
    /// reconciles only the parents labelled with its name (`stencil.dev/shard`), which
    /// the leader assigns. Implies --leader-elect; the ring is named after the leader
    /// Lease, and each member after its identity ($POD_NAME).
    #[arg(long)]
    pub sharding: bool,
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
    ///
    /// The definition reports `Listing`; the list goes on and the definition serves once
    /// it completes. A 403 reports `Forbidden` at once, an unserved kind `NotServed`, and
    /// both retry every 3 s.
    #[arg(long, default_value = "10s", value_parser = seconds)]
    pub sync_timeout: std::time::Duration,
    /// Who stores parents anew when a definition's storage version changes: `auto` asks
    /// the cluster (a StorageVersionMigration) where it serves and runs one, and rewrites
    /// each object otherwise; `rewrite` always rewrites.
    #[arg(long, value_enum, default_value = "auto")]
    pub storage_migration: stencil::migrate::Method,
    /// Where the conversion webhook listens (served only with --webhook-service or
    /// --webhook-url).
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_addr: std::net::SocketAddr,
    /// The Service through which the API server reaches the webhook, as NAMESPACE/NAME.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "webhook_url", value_parser = service_ref)]
    pub webhook_service: Option<(String, String)>,
    /// The webhook's base URL for a Stencil outside the cluster, e.g. `https://127.0.0.1:9443`.
    #[arg(long, value_name = "URL", value_parser = https_url)]
    pub webhook_url: Option<String>,
    /// A directory with `tls.crt`, `tls.key` and optionally `ca.crt` (cert-manager's),
    /// reloaded when they change; without it Stencil generates a certificate.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The Secret, in Stencil's namespace ($POD_NAMESPACE, else `default`), that keeps the
    /// generated certificate.
    #[arg(long, default_value = "stencil-webhook-cert")]
    pub webhook_secret: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Also serve this framework's controller objects (`metacontroller`: every
    /// CompositeController and DecoratorController on the cluster).
    #[arg(long, value_enum)]
    pub compat: Vec<super::Compat>,
    /// Call the hooks of HOST (a Service reference counts as NAME.NAMESPACE) at
    /// ADDRESS:PORT instead, for a Stencil outside the cluster (repeatable).
    #[arg(long, value_name = "HOST=ADDRESS:PORT", value_parser = stencil::hooks::parse_override)]
    pub resolve: Vec<(String, std::net::SocketAddr)>,
}

/// Log formats of `stencil run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses a Service reference written `NAMESPACE/NAME`.
fn service_ref(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!("`{text}` is not NAMESPACE/NAME")),
    }
}

/// Accepts an `https://` URL, without its trailing slash.
fn https_url(text: &str) -> Result<String, String> {
    if text.starts_with("https://") && text.len() > "https://".len() {
        Ok(text.trim_end_matches('/').to_string())
    } else {
        Err(format!(
            "`{text}` is not an https:// URL; the API server calls webhooks over TLS only"
        ))
    }
}

/// Parses whole seconds written `15s` or `15`.
pub(super) fn seconds(text: &str) -> Result<std::time::Duration, String> {
    let digits = text.strip_suffix('s').unwrap_or(text);
    digits
        .parse::<u64>()
        .ok()
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is not a positive number of seconds, e.g. 15s"))
}
