use super::*;

const RGD: &str = r#"apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata:
  name: web-app
spec:
  schema:
    apiVersion: v1alpha1
    kind: WebApp
    spec:
      name: string | required=true
      replicas: integer | default=1
      zones: "[]string"
      ingress:
        enabled: boolean | default=false
    status:
      available: ${deployment.status.availableReplicas}
      url: "http://${service.metadata.name}:${string(80)}"
      network:
        service: ${service.spec.clusterIP}
  resources:
    - id: settings
      externalRef:
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: ${schema.spec.name}-settings
    - id: deployment
      readyWhen:
        - ${deployment.status.availableReplicas == deployment.spec.replicas}
        - ${deployment.status.observedGeneration == deployment.metadata.generation}
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: ${schema.spec.name}
        spec:
          replicas: ${schema.spec.replicas}
          selector:
            matchLabels: {app: "${schema.spec.name}"}
          template:
            metadata:
              labels: {app: "${schema.spec.name}"}
            spec:
              containers:
                - name: app
                  image: nginx
    - id: service
      template:
        apiVersion: v1
        kind: Service
        metadata:
          name: ${schema.spec.name}
        spec:
          selector: ${deployment.spec.selector.matchLabels}
          ports: [{port: 80}]
    - id: ingress
      includeWhen:
        - ${schema.spec.ingress.enabled}
      template:
        apiVersion: networking.k8s.io/v1
        kind: Ingress
        metadata:
          name: ${schema.spec.name}
        spec:
          defaultBackend:
            service: {name: "${service.metadata.name}", port: {number: 80}}
    - id: zones
      forEach:
        - zone: ${schema.spec.zones}
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: ${schema.spec.name + '-' + zone}
        data:
          zone: ${zone}
"#;

fn translated(text: &str) -> Translation {
    let mut all = import("app.yaml", text).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn an_rgd_translates_into_a_definition_that_compiles() {
    let t = translated(RGD);
    assert_eq!(t.name, "webapps.kro.run");
    let (defs, diags) = crate::compile::compile_file("out.yaml", &t.text);
    assert!(diags.0.is_empty(), "{diags:?}\n{}", t.text);
    let def = &defs[0];
    assert_eq!(def.parent.api_version(), "kro.run/v1alpha1");
    let child = |name: &str| def.spec.children.iter().find(|c| c.name == name).unwrap();
    assert_eq!(child("service").depends_on, ["deployment"]);
    assert_eq!(child("ingress").depends_on, ["service"]);
    assert_eq!(
        child("ingress").include_when.as_deref(),
        Some("${schema.spec.ingress.enabled}")
    );
    assert!(child("zones").collection);
    assert_eq!(
        child("deployment").ready_when.as_deref(),
        Some(
            "${(deployment.status.availableReplicas == deployment.spec.replicas) && (deployment.status.observedGeneration == deployment.metadata.generation)}"
        )
    );
    assert_eq!(
        def.spec.lookups[0].name_template.as_deref(),
        Some("{{ parent.spec.name }}-settings")
    );
    let fields = &def.spec.status.fields;
    assert_eq!(fields["available"], "${deployment.status.availableReplicas}");
    assert_eq!(
        fields["url"],
        r#"${"http://" + string(service.metadata.name) + ":" + string(string(80))}"#
    );
    assert_eq!(fields["network"], r#"${{"service": service.spec.clusterIP}}"#);
    assert_eq!(def.spec.finalize.inherit_finalizers, ["kro.run/finalizer"]);
    assert!(
        t.text.contains("# dependsOn from the resources it reads: deployment"),
        "{}",
        t.text
    );
}

#[test]
fn a_refused_rgd_names_each_feature_at_its_line_and_nothing_is_translated() {
    let text = RGD
        .replace("    - id: service\n", "    - id: service\n      watch: true\n")
        .replace(
            "          name: ${schema.spec.name}-settings\n",
            "          selector: {matchLabels: {a: b}}\n          name: x\n",
        )
        .replace(
            "          image: nginx\n",
            "          image: ${url('https://x').getHost()}\n",
        );
    let errors = import("app.yaml", &text).unwrap_err();
    let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 3, "{said:#?}");
    assert!(
        said[0].starts_with("app.yaml:26: resources[settings].externalRef.metadata.selector"),
        "{said:#?}"
    );
    assert!(
        said[1].starts_with("app.yaml:32: resources[deployment].template") && said[1].contains("`url`"),
        "{said:#?}"
    );
    assert!(
        said[2].starts_with("app.yaml:49: resources[service].watch"),
        "{said:#?}"
    );
}

#[test]
fn a_file_without_an_rgd_says_so() {
    let errors = import("x.yaml", "apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
    assert!(
        errors[0].to_string().contains("no ResourceGraphDefinition"),
        "{errors:?}"
    );
}

#[test]
fn plurals_follow_kros() {
    for (kind, plural) in [
        ("webapp", "webapps"),
        ("policy", "policies"),
        ("ingress", "ingresses"),
        ("gateway", "gateways"),
        ("mesh", "meshes"),
        ("proxy", "proxies"),
    ] {
        assert_eq!(schema::plural(kind), plural);
    }
}

#[test]
fn an_external_ref_by_selector_is_a_lookup_of_the_matching_objects_in_every_namespace() {
    let by_selector = "          selector:\n            matchLabels: {team: \"${schema.spec.name}\"}\n            \
                       matchExpressions:\n              - {key: tier, operator: In, values: [web, \"${schema.spec.name}\"]}\n";
    let text = RGD.replace("          name: ${schema.spec.name}-settings\n", by_selector);
    let t = translated(&text);
    let (defs, diags) = crate::compile::compile_file("out.yaml", &t.text);
    assert!(diags.0.is_empty(), "{diags:?}\n{}", t.text);
    let lookup = &defs[0].spec.lookups[0];
    assert_eq!(lookup.namespace_template.as_deref(), Some("*"));
    assert!(defs[0].spec.allowed_namespaces.iter().any(|n| n == "*"));
    let selector = serde_json::to_value(lookup.selector.as_ref().unwrap()).unwrap();
    assert_eq!(selector["matchLabels"]["team"], "{{ parent.spec.name }}");
    assert_eq!(
        selector["matchExpressions"][0]["values"],
        serde_json::json!(["web", "{{ parent.spec.name }}"])
    );
    let computed = RGD.replace(
        "          name: ${schema.spec.name}-settings\n",
        "          selector: ${schema.spec.selector}\n",
    );
    let errors = import("app.yaml", &computed).unwrap_err();
    assert!(
        errors[0]
            .to_string()
            .contains("resources[settings].externalRef.metadata.selector"),
        "{errors:?}"
    );
}
