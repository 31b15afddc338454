//! A controller process under measurement (Stencil or kro): started with its log in a
//! file, read through its metrics endpoint and /proc, stopped.

use super::*;

pub(super) fn stencil_bin() -> PathBuf {
    std::env::var("STENCIL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/release/stencil"))
}

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A controller process under measurement: Stencil or kro.
pub(super) struct Controller {
    pub(super) child: Child,
    metrics: String,
}

impl Controller {
    pub(super) fn spawn(mut command: Command, metrics: String, kubeconfig: &Path, log: &Path) -> Controller {
        let file = std::fs::File::create(log).unwrap();
        let child = command
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("start the controller");
        Controller { child, metrics }
    }

    pub(super) fn stencil(defs: &Path, kubeconfig: &Path, log: &Path) -> Controller {
        Controller::stencil_with(defs, kubeconfig, log, &[], None)
    }

    /// Stencil with extra arguments, and `POD_NAME` when given.
    pub(super) fn stencil_with(
        defs: &Path,
        kubeconfig: &Path,
        log: &Path,
        extra: &[String],
        pod: Option<&str>,
    ) -> Controller {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(stencil_bin());
        command
            .args(["run", "--no-cluster-definitions", "--concurrency", "32"])
            .arg(format!("--definitions={}", defs.display()))
            .arg(format!("--metrics-addr={metrics}"))
            .args(extra)
            .env("RUST_LOG", "stencil=warn")
            // Where it keeps the definitions' revisions, as the chart's release namespace.
            .env("POD_NAMESPACE", "stencil-bench");
        if let Some(pod) = pod {
            command.env("POD_NAME", pod);
        }
        Controller::spawn(command, metrics, kubeconfig, log)
    }

    /// kro with the same concurrency as Stencil and client limits that do not hold it
    /// back below the API server's own.
    pub(super) fn kro(bin: &Path, kubeconfig: &Path, log: &Path) -> Controller {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(bin);
        command
            .arg(format!("--metrics-bind-address={metrics}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{}", free_port()))
            .args([
                "--dynamic-controller-concurrent-reconciles=32",
                "--client-qps=500",
                "--client-burst=1000",
            ]);
        Controller::spawn(command, metrics, kubeconfig, log)
    }

    /// Sum of every sample of a metric whose line starts with `prefix`.
    pub(super) async fn metric(&self, prefix: &str) -> f64 {
        let Ok(body) = http_get(&self.metrics, "/metrics").await else {
            return 0.0;
        };
        body.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    pub(super) async fn writes(&self) -> f64 {
        let total = self.metric("rest_client_requests_total").await;
        total - self.metric("rest_client_requests_total{method=\"GET\"}").await
    }

    pub(super) fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k)?.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    pub(super) fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(self.child.id())
    }

    /// Stops the controller gracefully (SIGTERM).
    pub(super) fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// A benchmark that fails part way must not leave its controller running against the
/// next rig.
impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) async fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// CPU seconds (user and system) a process has used.
pub(super) fn cpu_seconds_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}
