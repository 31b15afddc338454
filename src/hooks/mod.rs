//! Calling HTTP hooks: a JSON POST to a hook's URL (or `http://NAME.NAMESPACE:PORT/PATH`
//! for a Service), bounded by the hook's timeout, over HTTP or HTTPS with the system's
//! roots. `--resolve HOST=ADDRESS:PORT` sends the calls for HOST to another address, for
//! a Stencil outside the cluster. An answer is the body of a 2xx; a 429 says when to try
//! again; anything else is an error that names the hook and quotes its answer.

mod target;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST, RETRY_AFTER};
use http::{Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub use target::{Target, TargetError};

/// The longest answer read from a hook.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// How much of a failed answer an error quotes.
const QUOTED: usize = 512;

/// How long a 429 without a usable Retry-After waits.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// Why a hook call gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The hook did not answer within its timeout.
    #[error("{url}: no answer within {timeout:?}")]
    Timeout {
        /// The hook.
        url: String,
        /// Its timeout.
        timeout: Duration,
    },
    /// The hook asked to be called again later (429).
    #[error("{url}: busy (429), try again in {after:?}")]
    RetryAfter {
        /// The hook.
        url: String,
        /// When to call again.
        after: Duration,
    },
    /// The hook answered with a status other than 2xx.
    #[error("{url}: answered {status}: {body}")]
    Status {
        /// The hook.
        url: String,
        /// The status it answered.
        status: StatusCode,
        /// The start of its answer.
        body: String,
    },
    /// The call did not reach the hook, or its answer could not be read.
    #[error("{url}: {message}")]
    Transport {
        /// The hook.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// Where calls for a host go instead, from `--resolve HOST=ADDRESS:PORT`.
pub type Overrides = BTreeMap<String, SocketAddr>;

/// Reads one `--resolve` value, `HOST=ADDRESS:PORT`.
///
/// # Errors
///
/// The value has no `=`, or its address is not `IP:PORT`.
pub fn parse_override(text: &str) -> Result<(String, SocketAddr), String> {
    let (host, address) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: write HOST=ADDRESS:PORT"))?;
    let address = address
        .parse()
        .map_err(|e| format!("`{address}` is not ADDRESS:PORT: {e}"))?;
    Ok((host.to_string(), address))
}

/// A client of hooks, shared by every controller that calls them.
#[derive(Clone)]
pub struct HookClient {
    http: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    overrides: Overrides,
}

impl HookClient {
    /// A client with the system's TLS roots and `overrides` for some hosts.
    ///
    /// # Errors
    ///
    /// The system's TLS roots cannot be read.
    pub fn new(overrides: Overrides) -> std::io::Result<HookClient> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(HookClient {
            http: Client::builder(TokioExecutor::new()).build(https),
            overrides,
        })
    }

    /// POSTs `body` as JSON to `target` and returns the answer's body.
    ///
    /// # Errors
    ///
    /// See [`CallError`]: a timeout, a 429 (with when to try again), another status, or
    /// a failed connection.
    pub async fn call(&self, target: &Target, body: &serde_json::Value) -> Result<Bytes, CallError> {
        let url = target.url.to_string();
        let transport = |message: String| CallError::Transport {
            url: url.clone(),
            message,
        };
        let (uri, host) = target.routed(&self.overrides).map_err(|e| transport(e.to_string()))?;
        let payload = serde_json::to_vec(body).map_err(|e| transport(e.to_string()))?;
        let request = Request::post(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(HOST, host)
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| transport(e.to_string()))?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| transport(causes(&e)))?;
            let (parts, body) = response.into_parts();
            let body = http_body_util::Limited::new(body, MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| transport(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, CallError>((parts, body))
        };
        let (parts, body) =
            tokio::time::timeout(target.timeout, exchange)
                .await
                .map_err(|_| CallError::Timeout {
                    url: url.clone(),
                    timeout: target.timeout,
                })??;
        match parts.status {
            s if s.is_success() => Ok(body),
            StatusCode::TOO_MANY_REQUESTS => Err(CallError::RetryAfter {
                url,
                after: retry_after(parts.headers.get(RETRY_AFTER)),
            }),
            status => Err(CallError::Status {
                url,
                status,
                body: quote(&body),
            }),
        }
    }
}

/// The wait a Retry-After header asks for, in seconds (the HTTP-date form is not read).
fn retry_after(header: Option<&http::HeaderValue>) -> Duration {
    header
        .and_then(|h| h.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs)
}

/// An error with every cause it carries (`client error (Connect): dns error: ...`).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// The start of an answer, as text.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut quoted: String = text.chars().take(QUOTED).collect();
    if text.chars().count() > QUOTED {
        quoted.push('…');
    }
    quoted
}

#[cfg(test)]
mod tests;
