//! Stencil run inside the test: the library's runtime on the rig, its requests recorded.

use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{free_port, kubeconfig_path};

/// A Stencil controller running inside the test, with every write request it makes
/// recorded as `METHOD path`.
pub struct Stencil {
    task: tokio::task::JoinHandle<()>,
    /// Its metrics.
    pub metrics: std::sync::Arc<stencil::metrics::Metrics>,
    /// Write requests (anything but GET) made by this instance.
    pub writes: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its GET requests (reads, lists and watches), with their queries.
    pub reads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Stencil {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Stencil {
    /// The writes recorded so far, then forgets them.
    pub fn take_writes(&self) -> Vec<String> {
        std::mem::take(&mut *self.writes.lock().unwrap())
    }

    /// Successful reconciles so far, over every definition.
    pub fn reconciles(&self) -> u64 {
        self.metric_sum("controller_runtime_reconcile_total{", "result=\"success\"") as u64
    }

    /// The sum of the samples whose line starts with `prefix` and contains `with`.
    pub fn metric_sum(&self, prefix: &str, with: &str) -> f64 {
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with(prefix) && l.contains(with))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Starts Stencil on definition files and, with `cluster`, on OperatorDefinition resources.
pub async fn start_stencil(definitions: &[std::path::PathBuf], cluster: bool) -> Stencil {
    start_stencil_with(definitions, cluster, None).await
}

/// The conversion webhook on a free loopback port, its certificate generated into Secret
/// `secret` of namespace `namespace`.
pub fn loopback_webhook(namespace: &str, secret: &str) -> stencil::webhook::Settings {
    let port = free_port();
    stencil::webhook::Settings {
        addr: ([127, 0, 0, 1], port).into(),
        endpoint: stencil::crd::Endpoint::Url(format!("https://127.0.0.1:{port}")),
        certs: stencil::webhook::CertSource::Secret {
            namespace: namespace.to_string(),
            name: secret.to_string(),
        },
    }
}

/// [`start_stencil`] serving the conversion webhook with `webhook`.
pub async fn start_stencil_with(
    definitions: &[std::path::PathBuf],
    cluster: bool,
    webhook: Option<stencil::webhook::Settings>,
) -> Stencil {
    start_stencil_options(stencil::runtime::Options {
        definitions: definitions.to_vec(),
        cluster_definitions: cluster,
        concurrency: 4,
        webhook,
        ..Default::default()
    })
    .await
}

/// Starts Stencil with `options`.
pub async fn start_stencil_options(options: stencil::runtime::Options) -> Stencil {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "stencil=info".into()))
        .try_init();
    let writes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kubeconfig = Kubeconfig::read_from(kubeconfig_path()).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    let record = writes.clone();
    let reads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record_read = reads.clone();
    let runtime = stencil::runtime::Runtime::new(config, options).observe(std::sync::Arc::new(move |method, path| {
        if method != http::Method::GET {
            record.lock().unwrap().push(format!("{method} {path}"));
        } else {
            record_read.lock().unwrap().push(path.to_string());
        }
    }));
    let metrics = runtime.metrics();
    let task = tokio::spawn(async move {
        if let Err(e) = runtime.run(std::future::pending()).await {
            panic!("stencil stopped: {e}");
        }
    });
    Stencil {
        task,
        metrics,
        writes,
        reads,
    }
}
