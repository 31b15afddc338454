//! The hook protocol, purely: the JSON a sync, finalize or customize hook is sent, with
//! observed objects grouped by `Kind.apiVersion` and keyed as the hook's version says,
//! and the answers it may give, read loosely (v1) or strictly (v2) as metacontroller
//! reads them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::api::HookVersion;

/// What went wrong reading a hook's answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HookError {
    /// The body is not the JSON the hook's protocol answers with.
    #[error("the hook's answer is not a valid response: {0}")]
    Response(String),
}

/// The field name a kind's objects are grouped under: `Pod.v1`, `StatefulSet.apps/v1`.
pub fn kind_key(api_version: &str, kind: &str) -> String {
    format!("{kind}.{api_version}")
}

/// The key of `object` in its kind's map, as hook `version` keys it for `parent`: v1
/// uses the name, or `namespace/name` for a namespaced object under a cluster-scoped
/// parent; v2 always uses `namespace/name` for a namespaced object.
pub fn object_key(version: HookVersion, parent: &Value, object: &Value) -> String {
    let namespace = |o: &Value| {
        o.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .map(str::to_string)
    };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match (version, namespace(parent), namespace(object)) {
        (HookVersion::V1, None, Some(ns)) | (HookVersion::V2, _, Some(ns)) => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// The observed objects of each kind in `kinds` (`(apiVersion, kind)`), grouped and
/// keyed for `parent`; every kind has an entry, empty when nothing of it was observed.
pub fn object_map(version: HookVersion, parent: &Value, kinds: &[(String, String)], objects: &[Value]) -> Value {
    let mut map: BTreeMap<String, Map<String, Value>> = kinds
        .iter()
        .map(|(api_version, kind)| (kind_key(api_version, kind), Map::new()))
        .collect();
    for object in objects {
        let field = |f: &str| object.get(f).and_then(Value::as_str).unwrap_or_default();
        if let Some(group) = map.get_mut(&kind_key(field("apiVersion"), field("kind"))) {
            group.insert(object_key(version, parent, object), object.clone());
        }
    }
    json!(map)
}

/// Which controller kind a request is for: the parent's key and the children's differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A CompositeController: `parent` and `children`.
    Composite,
    /// A DecoratorController: `object` and `attachments`.
    Decorator,
}

impl Shape {
    fn parent_key(self) -> &'static str {
        match self {
            Shape::Composite => "parent",
            Shape::Decorator => "object",
        }
    }

    fn children_key(self) -> &'static str {
        match self {
            Shape::Composite => "children",
            Shape::Decorator => "attachments",
        }
    }

    /// The fields a sync or finalize hook of this shape may answer with.
    fn answer_keys(self) -> &'static [&'static str] {
        match self {
            Shape::Composite => &["status", "children", "resyncAfterSeconds", "finalized"],
            Shape::Decorator => &[
                "labels",
                "annotations",
                "status",
                "attachments",
                "resyncAfterSeconds",
                "finalized",
            ],
        }
    }
}

/// The body of a sync (or, with `finalizing`, finalize) request.
pub fn sync_request(
    shape: Shape,
    controller: &Value,
    parent: &Value,
    children: Value,
    related: Value,
    finalizing: bool,
) -> Value {
    let mut body = Map::new();
    body.insert("controller".into(), controller.clone());
    body.insert(shape.parent_key().into(), parent.clone());
    body.insert(shape.children_key().into(), children);
    body.insert("related".into(), related);
    body.insert("finalizing".into(), finalizing.into());
    Value::Object(body)
}

/// The body of a customize request.
pub fn customize_request(controller: &Value, parent: &Value) -> Value {
    json!({"controller": controller, "parent": parent})
}

/// A sync or finalize hook's answer.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SyncResponse {
    /// Replaces the parent's status; `None` leaves it.
    pub status: Option<Value>,
    /// The desired children (or attachments).
    pub children: Vec<Value>,
    /// A one-time resync after this many seconds, when positive.
    pub resync_after_seconds: f64,
    /// A finalize hook's word that the parent may go.
    pub finalized: bool,
    /// A decorator's labels for its object: `None` removes one.
    pub labels: BTreeMap<String, Option<String>>,
    /// A decorator's annotations for its object: `None` removes one.
    pub annotations: BTreeMap<String, Option<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompositeAnswer {
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    children: Option<Vec<Value>>,
    #[serde(default)]
    resync_after_seconds: f64,
    #[serde(default)]
    finalized: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DecoratorAnswer {
    #[serde(default)]
    labels: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    attachments: Option<Vec<Value>>,
    #[serde(default)]
    resync_after_seconds: f64,
    #[serde(default)]
    finalized: bool,
}

/// Whether a hook's answer is read strictly: as `responseUnMarshallMode` says, else
/// strictly for v2 hooks and loosely for v1 ones, as metacontroller reads them.
pub fn strict(version: HookVersion, mode: Option<&str>) -> bool {
    match mode {
        Some("strict") => true,
        Some("loose") => false,
        _ => version == HookVersion::V2,
    }
}

fn read<T: DeserializeOwned>(body: &[u8]) -> Result<T, HookError> {
    serde_json::from_slice(body).map_err(|e| HookError::Response(e.to_string()))
}

/// Reads a sync or finalize hook's answer `body`; a strict reading refuses unknown fields.
///
/// # Errors
///
/// The body is not JSON, or not the shape `shape`'s hooks answer with.
pub fn sync_response(shape: Shape, body: &[u8], strict: bool) -> Result<SyncResponse, HookError> {
    let value: Value = read(body)?;
    if strict && let Some(fields) = value.as_object() {
        let known = shape.answer_keys();
        if let Some(unknown) = fields.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(HookError::Response(format!(
                "unknown field `{unknown}`, expected one of {}",
                known.join(", ")
            )));
        }
    }
    let parse = |e: serde_json::Error| HookError::Response(e.to_string());
    let answer = match shape {
        Shape::Composite => composite(serde_json::from_value(value).map_err(parse)?),
        Shape::Decorator => decorator(serde_json::from_value(value).map_err(parse)?),
    };
    if let Some(bad) = answer.children.iter().find(|c| !c.is_object()) {
        return Err(HookError::Response(format!("a child is not an object: {bad}")));
    }
    Ok(answer)
}

fn composite(a: CompositeAnswer) -> SyncResponse {
    SyncResponse {
        status: a.status.filter(|s| !s.is_null()),
        children: a.children.unwrap_or_default(),
        resync_after_seconds: a.resync_after_seconds,
        finalized: a.finalized,
        ..SyncResponse::default()
    }
}

fn decorator(a: DecoratorAnswer) -> SyncResponse {
    SyncResponse {
        status: a.status.filter(|s| !s.is_null()),
        children: a.attachments.unwrap_or_default(),
        resync_after_seconds: a.resync_after_seconds,
        finalized: a.finalized,
        labels: a.labels.unwrap_or_default(),
        annotations: a.annotations.unwrap_or_default(),
    }
}

/// A rule of a customize hook's answer: objects of one kind the parent's sync sees.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RelatedRule {
    /// `group/version`, or `v1`.
    pub api_version: String,
    /// The lowercase plural name.
    pub resource: String,
    /// Objects with these labels.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// Objects in namespaces with these labels.
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// Objects in this namespace only.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Objects of these names only.
    #[serde(default)]
    pub names: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CustomizeAnswer {
    #[serde(default)]
    related_resources: Vec<RelatedRule>,
}

/// Reads a customize hook's answer: the related objects' rules.
///
/// # Errors
///
/// The body is not JSON with a `relatedResources` list of rules.
pub fn customize_response(body: &[u8]) -> Result<Vec<RelatedRule>, HookError> {
    Ok(read::<CustomizeAnswer>(body)?.related_resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
        let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = ns.into();
        }
        o
    }

    #[test]
    fn children_are_keyed_as_each_hook_version_says() {
        let namespaced = object("example.com/v1", "Thing", Some("shop"), "p");
        let cluster = object("example.com/v1", "Realm", None, "r");
        let pod = object("v1", "Pod", Some("shop"), "web-0");
        let ns = object("v1", "Namespace", None, "shop");
        for (version, parent, obj, key) in [
            (HookVersion::V1, &namespaced, &pod, "web-0"),
            (HookVersion::V1, &cluster, &pod, "shop/web-0"),
            (HookVersion::V1, &cluster, &ns, "shop"),
            (HookVersion::V2, &namespaced, &pod, "shop/web-0"),
            (HookVersion::V2, &cluster, &ns, "shop"),
        ] {
            assert_eq!(object_key(version, parent, obj), key, "{version:?} {obj}");
        }
    }

    #[test]
    fn every_kind_has_an_entry_and_objects_go_under_kind_dot_api_version() {
        let parent = object("example.com/v1", "Thing", Some("shop"), "p");
        let kinds = [
            ("v1".to_string(), "Pod".to_string()),
            ("apps/v1".to_string(), "StatefulSet".to_string()),
        ];
        let pod = object("v1", "Pod", Some("shop"), "web-0");
        let stranger = object("v1", "Secret", Some("shop"), "s");
        let map = object_map(HookVersion::V2, &parent, &kinds, &[pod.clone(), stranger]);
        assert_eq!(map, json!({"Pod.v1": {"shop/web-0": pod}, "StatefulSet.apps/v1": {}}));
    }

    #[test]
    fn requests_use_the_keys_of_their_controller_kind() {
        let parent = json!({"metadata": {"name": "p"}});
        let body = sync_request(Shape::Decorator, &json!({}), &parent, json!({}), json!({}), true);
        assert_eq!(body["object"], parent);
        assert_eq!(body["finalizing"], true);
        assert!(body.get("attachments").is_some() && body.get("children").is_none());
        let body = sync_request(Shape::Composite, &json!({}), &parent, json!({}), json!({}), false);
        assert_eq!(body["parent"], parent);
        assert!(body.get("children").is_some());
    }

    #[test]
    fn a_loose_answer_ignores_unknown_fields_and_a_strict_one_refuses_them() {
        let body = br#"{"status": {"ready": 1}, "children": [{"kind": "Pod"}], "extra": 1, "resyncAfterSeconds": 2.5}"#;
        let loose = sync_response(Shape::Composite, body, false).unwrap();
        assert_eq!(loose.status, Some(json!({"ready": 1})));
        assert_eq!(loose.children.len(), 1);
        assert!((loose.resync_after_seconds - 2.5).abs() < f64::EPSILON);
        let err = sync_response(Shape::Composite, body, true).unwrap_err();
        assert!(err.to_string().contains("extra"), "{err}");
        assert!(strict(HookVersion::V2, None) && !strict(HookVersion::V1, None));
        assert!(strict(HookVersion::V1, Some("strict")) && !strict(HookVersion::V2, Some("loose")));
    }

    #[test]
    fn a_decorators_answer_may_remove_labels_and_a_null_status_leaves_it() {
        let body = br#"{"labels": {"a": "1", "b": null}, "status": null, "attachments": []}"#;
        let answer = sync_response(Shape::Decorator, body, true).unwrap();
        assert_eq!(answer.labels["a"], Some("1".into()));
        assert_eq!(answer.labels["b"], None);
        assert_eq!(answer.status, None);
        let bad = sync_response(Shape::Decorator, br#"{"attachments": [3]}"#, false).unwrap_err();
        assert!(bad.to_string().contains("not an object"), "{bad}");
    }

    #[test]
    fn a_customize_answer_lists_related_rules() {
        let body =
            br#"{"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": "a", "names": ["x"]},
            {"apiVersion": "v1", "resource": "secrets", "labelSelector": {"matchLabels": {"t": "1"}}}]}"#;
        let rules = customize_response(body).unwrap();
        assert_eq!(rules[0].names, ["x"]);
        assert_eq!(rules[0].namespace.as_deref(), Some("a"));
        assert!(rules[1].label_selector.is_some());
    }
}
