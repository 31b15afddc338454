//! The hook client against a hook server on loopback: an answer, a 429 with when to come
//! back, a failure quoting the hook's answer, a timeout, and `--resolve` routing a
//! Service's name to the server.

use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::post;
use serde_json::json;

use super::*;
use crate::metacontroller::api::Webhook;

/// Starts a hook server on loopback; returns its address.
async fn hook_server() -> SocketAddr {
    let app = Router::new()
        .route("/echo", post(|body: String| async move { body }))
        .route(
            "/busy",
            post(|| async { (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "7")], "") }),
        )
        .route(
            "/fail",
            post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "the hook broke") }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// A client that sends `hooks.tools` to `address`, and the target `path` there.
fn routed(address: SocketAddr, path: &str, timeout: &str) -> (HookClient, Target) {
    let client = HookClient::new(Overrides::from([("hooks.tools".to_string(), address)])).unwrap();
    let target = Target::of(&Webhook {
        url: Some(format!("http://hooks.tools{path}")),
        timeout: Some(timeout.into()),
        ..Webhook::default()
    })
    .unwrap();
    (client, target)
}

#[tokio::test]
async fn an_answer_is_the_body_of_a_success() {
    let (client, target) = routed(hook_server().await, "/echo", "5s");
    let answer = client.call(&target, &json!({"parent": 1})).await.unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&answer).unwrap(),
        json!({"parent": 1})
    );
}

#[tokio::test]
async fn a_busy_hook_says_when_to_come_back() {
    let (client, target) = routed(hook_server().await, "/busy", "5s");
    match client.call(&target, &json!({})).await {
        Err(CallError::RetryAfter { after, .. }) => assert_eq!(after, Duration::from_secs(7)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_failure_quotes_the_hooks_answer_and_names_it() {
    let (client, target) = routed(hook_server().await, "/fail", "5s");
    let err = client.call(&target, &json!({})).await.unwrap_err().to_string();
    assert!(
        err.contains("http://hooks.tools/fail") && err.contains("500") && err.contains("the hook broke"),
        "{err}"
    );
}

#[tokio::test]
async fn a_hook_that_does_not_answer_in_time_times_out() {
    let (client, target) = routed(hook_server().await, "/slow", "200ms");
    match client.call(&target, &json!({})).await {
        Err(CallError::Timeout { timeout, .. }) => assert_eq!(timeout, Duration::from_millis(200)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_resolve_flag_is_host_equals_address() {
    let (host, address) = parse_override("hooks.tools=127.0.0.1:9000").unwrap();
    assert_eq!((host.as_str(), address.port()), ("hooks.tools", 9000));
    assert!(parse_override("hooks.tools").is_err());
    assert!(parse_override("hooks.tools=somewhere").is_err());
}

#[tokio::test]
async fn a_hook_that_cannot_be_reached_says_why() {
    let (client, target) = routed("127.0.0.1:9".parse().unwrap(), "/sync", "5s");
    let err = client.call(&target, &json!({})).await.unwrap_err().to_string();
    assert!(err.contains("Connect") && err.contains("refused"), "{err}");
}
