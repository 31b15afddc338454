//! Where a hook is called and for how long: its URL, or its Service's address
//! (`http://NAME.NAMESPACE:PORT/PATH`), and its timeout written as a Go duration; and
//! the address a call really goes to when `--resolve` names the hook's host.

use std::time::Duration;

use http::Uri;

use super::Overrides;
use crate::metacontroller::api::Webhook;

/// A hook's timeout when it gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A hook that cannot be called as written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    /// Neither `url` nor `service` is set.
    #[error("the webhook has neither `url` nor `service`")]
    Nowhere,
    /// The URL does not parse.
    #[error("`{0}` is not a URL: {1}")]
    Url(String, String),
    /// The timeout is not a Go duration.
    #[error("timeout `{0}` is not a duration such as 10s or 1m30s")]
    Timeout(String),
}

/// A hook to call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its URL.
    pub url: Uri,
    /// How long a call may take.
    pub timeout: Duration,
}

impl Target {
    /// The target a metacontroller webhook names.
    ///
    /// # Errors
    ///
    /// It names no URL or Service, its URL does not parse, or its timeout is not a
    /// duration.
    pub fn of(webhook: &Webhook) -> Result<Target, TargetError> {
        let url = match (&webhook.url, &webhook.service) {
            (Some(url), _) => url.clone(),
            (None, Some(service)) => format!(
                "{}://{}.{}:{}{}",
                service.protocol.as_deref().unwrap_or("http"),
                service.name,
                service.namespace,
                service.port.unwrap_or(80),
                webhook.path.as_deref().unwrap_or_default()
            ),
            (None, None) => return Err(TargetError::Nowhere),
        };
        let parsed: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| TargetError::Url(url.clone(), e.to_string()))?;
        if parsed.host().is_none() {
            return Err(TargetError::Url(url, "it names no host".into()));
        }
        let timeout = match &webhook.timeout {
            Some(t) => go_duration(t).ok_or_else(|| TargetError::Timeout(t.clone()))?,
            None => DEFAULT_TIMEOUT,
        };
        Ok(Target { url: parsed, timeout })
    }

    /// The URI a call really goes to (the override's address for an overridden host),
    /// and the Host header it carries (always the hook's own authority).
    ///
    /// # Errors
    ///
    /// The overridden URI does not build (it always does for a parsed URL).
    pub fn routed(&self, overrides: &Overrides) -> Result<(Uri, String), http::Error> {
        let authority = self.url.authority().map(ToString::to_string).unwrap_or_default();
        let host = self.url.host().unwrap_or_default();
        match overrides.get(host) {
            None => Ok((self.url.clone(), authority)),
            Some(address) => {
                let path = self.url.path_and_query().map_or("/", |p| p.as_str());
                let uri = Uri::builder()
                    .scheme(self.url.scheme_str().unwrap_or("http"))
                    .authority(address.to_string())
                    .path_and_query(path)
                    .build()?;
                Ok((uri, authority))
            }
        }
    }
}

/// A Go duration (`300ms`, `10s`, `1m30s`, `1.5h`): numbers each with a unit.
fn go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit..];
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metacontroller::api::ServiceReference;

    #[test]
    fn a_service_reference_is_called_at_name_dot_namespace() {
        let webhook = Webhook {
            service: Some(ServiceReference {
                name: "hooks".into(),
                namespace: "tools".into(),
                port: Some(8080),
                protocol: None,
            }),
            path: Some("/sync".into()),
            ..Webhook::default()
        };
        let target = Target::of(&webhook).unwrap();
        assert_eq!(target.url, "http://hooks.tools:8080/sync");
        assert_eq!(target.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn a_url_wins_over_a_service_and_a_timeout_is_a_go_duration() {
        let webhook = Webhook {
            url: Some("http://a.b/c".into()),
            timeout: Some("1m30s".into()),
            service: Some(ServiceReference {
                name: "x".into(),
                namespace: "y".into(),
                port: None,
                protocol: None,
            }),
            ..Webhook::default()
        };
        let target = Target::of(&webhook).unwrap();
        assert_eq!(target.url, "http://a.b/c");
        assert_eq!(target.timeout, Duration::from_secs(90));
        assert_eq!(go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(go_duration("10"), None);
        assert_eq!(go_duration("10 seconds"), None);
    }

    #[test]
    fn a_webhook_that_names_nothing_or_a_bad_timeout_is_refused() {
        assert_eq!(Target::of(&Webhook::default()), Err(TargetError::Nowhere));
        let webhook = Webhook {
            url: Some("http://a/".into()),
            timeout: Some("soon".into()),
            ..Webhook::default()
        };
        assert_eq!(Target::of(&webhook), Err(TargetError::Timeout("soon".into())));
    }

    #[test]
    fn an_overridden_host_is_called_at_its_address_with_its_own_host_header() {
        let target = Target::of(&Webhook {
            url: Some("http://hooks.tools:8080/sync?x=1".into()),
            ..Webhook::default()
        })
        .unwrap();
        let overrides = Overrides::from([("hooks.tools".to_string(), "127.0.0.1:9000".parse().unwrap())]);
        let (uri, host) = target.routed(&overrides).unwrap();
        assert_eq!(uri, "http://127.0.0.1:9000/sync?x=1");
        assert_eq!(host, "hooks.tools:8080");
        let (uri, _) = target.routed(&Overrides::new()).unwrap();
        assert_eq!(uri, target.url);
    }
}
