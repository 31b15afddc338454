//! `stencil run` as a process: started on loopback with its log in a file, read through
//! its metrics endpoint and its log, signalled, and waited on until it exits.

use std::time::{Duration, Instant};

/// A `stencil` process, killed when dropped; its output goes to a log file.
pub struct Process {
    pub child: std::process::Child,
    pub log: std::path::PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// What the process has logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of its log.
    pub fn tail(&self, n: usize) -> String {
        let logs = self.logs();
        let lines: Vec<&str> = logs.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// How many lines of its log contain `text`.
    pub fn logged(&self, text: &str) -> usize {
        self.logs().lines().filter(|l| l.contains(text)).count()
    }

    /// The `sent` count of the first log line that contains `text` (a fence's count of the
    /// writes it let through, logged as the process stops); panics with the log if none.
    pub fn sent_count(&self, text: &str) -> f64 {
        let log = self.logs();
        log.lines()
            .filter(|l| l.contains(text))
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["sent"].as_f64())
            .unwrap_or_else(|| panic!("no `{text}` count in the log:\n{log}"))
    }

    /// Sends `sig` (`-STOP`, `-CONT`, `-KILL`) to the process.
    pub fn signal(&self, sig: &str) {
        let status = std::process::Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig}");
    }

    /// Waits up to `timeout` for the process to exit by itself; panics with its log's
    /// tail, naming it `what`, if it does not.
    pub async fn exit_within(&mut self, timeout: Duration, what: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{what} did not exit within {timeout:?}; its log ends:\n{}",
                self.tail(40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Where it serves its HTTP endpoint, as its log says once it is bound.
    pub fn metrics_addr(&self) -> Option<String> {
        let logs = self.logs();
        let line = logs.lines().rev().find(|l| l.contains("serving /metrics"))?;
        let port: String = line
            .rsplit("127.0.0.1:")
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (!port.is_empty()).then(|| format!("127.0.0.1:{port}"))
    }

    /// GETs a path of its HTTP endpoint; `None` while it does not answer.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.metrics_addr()?).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((status, body))
    }

    /// Requests the process has made with these HTTP methods, from its metrics.
    pub async fn requests(&self, methods: &[&str]) -> f64 {
        let mut total = 0.0;
        for method in methods {
            total += self
                .metric(&format!("rest_client_requests_total{{method=\"{method}\"}}"))
                .await
                .unwrap_or(0.0);
        }
        total
    }

    /// The value of one metric sample, e.g. `leader_election_master_status{name="x"}`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        body.lines().find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `stencil run` with `args` against `kubeconfig`, serving metrics on loopback.
pub fn spawn_stencil(args: &[String], kubeconfig: &std::path::Path, log: std::path::PathBuf) -> Process {
    spawn_stencil_env(args, kubeconfig, log, &[])
}

/// [`spawn_stencil`] with extra environment variables (fault injection).
pub fn spawn_stencil_env(
    args: &[String],
    kubeconfig: &std::path::Path,
    log: std::path::PathBuf,
    env: &[(&str, String)],
) -> Process {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .arg("run")
        // Port 0: the process binds a free port and logs it, so processes started at
        // once never race for one.
        .arg("--metrics-addr=127.0.0.1:0")
        .args(args)
        // STENCIL_TEST_LOG turns up a spawned process's logging while a test is chased;
        // a test's own RUST_LOG in `env` wins.
        .env(
            "RUST_LOG",
            std::env::var("STENCIL_TEST_LOG").unwrap_or_else(|_| "stencil=info".into()),
        )
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("KUBECONFIG", kubeconfig)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("start stencil");
    Process { child, log }
}
