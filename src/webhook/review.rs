//! Answering one `ConversionReview`, purely: every object converted, or a failure that
//! says which object and why. Never a panic, whatever the request holds.

use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::core::{Status, TypeMeta};
use serde_json::Value;

use crate::compile::CompiledDefinition;

/// The review answering `body`, a ConversionReview for CRD `crd`, with `def` the
/// definition that converts it, or why none does. Objects are converted one by one
/// until `deadline`: a review that would outlive it fails, saying how far it got, so no
/// render goes on after the API server has given up on the answer.
pub fn answer(
    crd: &str,
    def: Result<&CompiledDefinition, &str>,
    body: &[u8],
    deadline: std::time::Instant,
) -> ConversionReview {
    let review: ConversionReview = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return invalid(format!("malformed ConversionReview: {e}")),
    };
    let request = match ConversionRequest::from_review(review) {
        Ok(r) => r,
        Err(e) => return invalid(format!("malformed ConversionReview: {e}")),
    };
    let version = request
        .desired_api_version
        .rsplit_once('/')
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    let desired = request.desired_api_version.clone();
    let objects = request.objects.clone();
    let response = ConversionResponse::for_request(request);
    let def = match def {
        Ok(def) => def,
        Err(why) => {
            tracing::warn!(crd, "refusing a conversion: {why}");
            return with_types(response.failure(Status::failure(why, "NotFound")).into_review());
        }
    };
    if desired.rsplit_once('/').map(|(g, _)| g) != Some(def.parent.group.as_str()) {
        let message = format!(
            "desiredAPIVersion {desired} is not in group {} of CRD {crd}",
            def.parent.group
        );
        return with_types(response.failure(Status::failure(&message, "BadRequest")).into_review());
    }
    let converted: Result<Vec<Value>, String> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "converting CRD {crd}'s objects took too long: {i} of {} converted before the review's deadline",
                    objects.len()
                ));
            }
            crate::convert::convert(def, o, &version).map_err(|e| e.to_string())
        })
        .collect();
    let review = match converted {
        Ok(objects) => response.success(objects).into_review(),
        Err(message) => {
            tracing::warn!(crd, %message, "conversion failed");
            response.failure(Status::failure(&message, "Invalid")).into_review()
        }
    };
    with_types(review)
}

/// Whether a review is a success.
pub fn succeeded(review: &ConversionReview) -> bool {
    review
        .response
        .as_ref()
        .is_some_and(|r| r.result.status == Some(kube::core::response::StatusSummary::Success))
}

fn invalid(message: String) -> ConversionReview {
    with_types(ConversionResponse::invalid(Status::failure(&message, "BadRequest")).into_review())
}

/// The API server needs `apiVersion` and `kind` on the answer, whatever the request held.
fn with_types(mut review: ConversionReview) -> ConversionReview {
    review.types = TypeMeta {
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "ConversionReview".into(),
    };
    review
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn website() -> CompiledDefinition {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml");
        let (mut defs, _) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
        defs.remove(0)
    }

    fn request(desired: &str, objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "r1", "desiredAPIVersion": desired, "objects": objects}
        }))
        .unwrap()
    }

    fn site(api_version: &str, spec: Value) -> Value {
        json!({"apiVersion": api_version, "kind": "Website",
               "metadata": {"name": "docs", "namespace": "web"}, "spec": spec})
    }

    /// A deadline no test reaches.
    fn later() -> std::time::Instant {
        std::time::Instant::now() + std::time::Duration::from_secs(3600)
    }

    fn message(review: &ConversionReview) -> String {
        review.response.as_ref().unwrap().result.message.clone()
    }

    #[test]
    fn every_object_is_converted_in_order() {
        let def = website();
        let body = request(
            "examples.stencil.dev/v1",
            json!([
                site(
                    "examples.stencil.dev/v1alpha1",
                    json!({"content": {}, "domain": "a.example"})
                ),
                site(
                    "examples.stencil.dev/v1beta1",
                    json!({"content": {}, "domains": ["b.example"]})
                ),
            ]),
        );
        let review = answer("websites.examples.stencil.dev", Ok(&def), &body, later());
        assert!(succeeded(&review), "{review:?}");
        let response = review.response.unwrap();
        assert_eq!(response.uid, "r1");
        assert_eq!(response.converted_objects[0]["spec"]["domains"], json!(["a.example"]));
        assert_eq!(response.converted_objects[1]["spec"]["domains"], json!(["b.example"]));
        assert_eq!(response.converted_objects[1]["apiVersion"], "examples.stencil.dev/v1");
    }

    #[test]
    fn bad_input_is_a_failure_that_says_why() {
        let def = website();
        let crd = "websites.examples.stencil.dev";
        let malformed = answer(crd, Ok(&def), b"{not json", later());
        assert!(!succeeded(&malformed));
        assert!(message(&malformed).contains("malformed ConversionReview"));
        assert_eq!(malformed.types.kind, "ConversionReview");

        let one = json!([site("examples.stencil.dev/v1", json!({"content": {}}))]);
        let unknown = answer(crd, Ok(&def), &request("examples.stencil.dev/v9", one.clone()), later());
        assert!(
            message(&unknown).contains("examples.stencil.dev/v9 is not a version"),
            "{unknown:?}"
        );
        let other_group = answer(crd, Ok(&def), &request("apps/v1", one.clone()), later());
        assert!(message(&other_group).contains("not in group"), "{other_group:?}");
        let nobody = answer(
            crd,
            Err("no definition converts it"),
            &request("examples.stencil.dev/v1alpha1", one.clone()),
            later(),
        );
        assert!(message(&nobody).contains("no definition"), "{nobody:?}");
        let late = answer(
            crd,
            Ok(&def),
            &request("examples.stencil.dev/v1alpha1", one),
            std::time::Instant::now(),
        );
        assert!(
            message(&late).contains("0 of 1 converted before the review's deadline"),
            "{late:?}"
        );
    }
}
