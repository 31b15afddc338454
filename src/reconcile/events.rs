//! Events on parents. A Warning goes through kube's recorder, which turns a repeat (a
//! retry that fails the same way) into a series on one Event. A Normal event says what one
//! pass did (children created, updated, adopted, pruned) and does not repeat, so it is
//! created directly: the recorder keeps every event it publishes for six minutes to find
//! repeats, which for a burst of new parents is one cached Event per parent.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Where a controller's events go.
#[derive(Clone)]
pub(super) struct Events {
    client: Client,
    reporter: Reporter,
    recorder: Recorder,
}

impl Events {
    /// Events reported as `reporter`.
    pub(super) fn new(client: Client, reporter: Reporter) -> Events {
        Events {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            reporter,
        }
    }

    /// Publishes an event on `regarding`.
    ///
    /// # Errors
    ///
    /// The API server refused the event or did not answer.
    pub(super) async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let note: String = note.chars().take(1000).collect();
        if matches!(type_, EventType::Warning) {
            let event = Event {
                type_,
                reason: reason.into(),
                note: Some(note),
                action: reason.into(),
                secondary: None,
            };
            return self.recorder.publish(&event, regarding).await;
        }
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        Api::<K8sEvent>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &normal(&self.reporter, regarding, reason, note))
            .await
            .map(|_| ())
    }
}

/// A Normal event as kube's recorder writes a new one.
fn normal(reporter: &Reporter, regarding: &ObjectReference, reason: &str, note: String) -> K8sEvent {
    let now = k8s_openapi::jiff::Timestamp::now();
    let name = regarding.name.as_deref().unwrap_or(&reporter.controller);
    K8sEvent {
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        action: Some(reason.into()),
        reason: Some(reason.into()),
        note: Some(note),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(reporter.instance.clone().unwrap_or_else(|| reporter.controller.clone())),
        type_: Some("Normal".into()),
        ..K8sEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normal_event_names_its_object_reporter_and_reason() {
        let reporter = Reporter {
            controller: "stencil".into(),
            instance: Some("stencil-0".into()),
        };
        let regarding = ObjectReference {
            namespace: Some("shop".into()),
            name: Some("orders".into()),
            kind: Some("Database".into()),
            ..ObjectReference::default()
        };
        let event = normal(&reporter, &regarding, "Created", "ConfigMap shop/orders created".into());
        assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
        assert!(event.metadata.name.as_deref().is_some_and(|n| n.starts_with("orders.")));
        assert_eq!(
            (event.reason.as_deref(), event.type_.as_deref()),
            (Some("Created"), Some("Normal"))
        );
        assert_eq!(event.reporting_instance.as_deref(), Some("stencil-0"));
        assert_eq!(event.regarding, Some(regarding));
        assert!(event.event_time.is_some() && event.series.is_none());
    }
}
