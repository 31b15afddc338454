//! The fields of a definition an error can point at, and the path each is shown as.

use crate::definition::OperatorDefinitionSpec;

/// A field of a definition that an error can point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Field {
    Definition,
    Parent,
    Crd,
    Decorate,
    AllowedNamespaces,
    ResyncSeconds,
    Rollout,
    Helpers,
    ChildName(usize),
    ChildTemplate(usize),
    /// A child written as an object: the child's index and the dotted path of a field
    /// inside it, empty for the object itself.
    ChildObject(usize, String),
    ChildUpdatePolicy(usize),
    ChildReadyWhen(usize),
    ChildIncludeWhen(usize),
    ChildDependsOn(usize),
    LookupName(usize),
    LookupNameTemplate(usize),
    LookupNamespaceTemplate(usize),
    LookupSelector(usize),
    StatusValue(String),
    Condition(usize),
    StatusTemplate,
    FinalizeUntil,
    FinalizeInherit,
    /// A CRD version's conversion template: the version's index, and `toStorage` (true)
    /// or `fromStorage`.
    Conversion(usize, bool),
    /// A CRD version, by index.
    Version(usize),
    /// A field of a CRD version's compact schema: the version's index and the field's
    /// dotted path under `schema` (`spec.storage.size`), empty for the schema itself.
    Schema(usize, String),
}

impl Field {
    /// The field's path as shown in errors, with children and lookups named.
    pub(crate) fn path(&self, spec: &OperatorDefinitionSpec) -> Option<String> {
        // Children are numbered `children` first, then `finalize.children`.
        let n = spec.children.len();
        let child = |i: &usize| match spec.children.get(*i) {
            Some(c) => format!("children[{}]", c.name),
            None => spec.finalize.children.get(*i - n).map_or_else(
                || format!("children[{i}]"),
                |c| format!("finalize.children[{}]", c.name),
            ),
        };
        let lookup = |i: &usize| spec.lookups.get(*i).map_or_else(|| i.to_string(), |l| l.name.clone());
        let condition = |i: &usize| {
            spec.status
                .conditions
                .get(*i)
                .map_or_else(|| i.to_string(), |c| c.type_.clone())
        };
        let version = |i: &usize| {
            spec.crd
                .as_ref()
                .and_then(|c| c.versions.get(*i))
                .map_or_else(|| i.to_string(), |v| v.name.clone())
        };
        Some(match self {
            Field::Definition => return None,
            Field::Parent => "spec.parent".into(),
            Field::Crd => "spec.crd".into(),
            Field::Decorate => "spec.decorate".into(),
            Field::AllowedNamespaces => "spec.allowedNamespaces".into(),
            Field::ResyncSeconds => "spec.resyncSeconds".into(),
            Field::Rollout => "spec.rollout".into(),
            Field::Helpers => "spec.helpers".into(),
            Field::ChildName(i) => format!("{}.name", child(i)),
            Field::ChildTemplate(i) => format!("{}.template", child(i)),
            Field::ChildObject(i, path) if path.is_empty() => format!("{}.object", child(i)),
            Field::ChildObject(i, path) => format!("{}.object.{path}", child(i)),
            Field::ChildUpdatePolicy(i) => format!("{}.updatePolicy", child(i)),
            Field::ChildReadyWhen(i) => format!("{}.readyWhen", child(i)),
            Field::ChildIncludeWhen(i) => format!("{}.includeWhen", child(i)),
            Field::ChildDependsOn(i) => format!("{}.dependsOn", child(i)),
            Field::LookupName(i) => format!("lookups[{}].name", lookup(i)),
            Field::LookupNameTemplate(i) => format!("lookups[{}].nameTemplate", lookup(i)),
            Field::LookupNamespaceTemplate(i) => format!("lookups[{}].namespaceTemplate", lookup(i)),
            Field::LookupSelector(i) => format!("lookups[{}].selector", lookup(i)),
            Field::StatusValue(k) => format!("status.fields.{k}"),
            Field::Condition(i) => format!("status.conditions[{}].when", condition(i)),
            Field::StatusTemplate => "status.template".into(),
            Field::FinalizeUntil => "finalize.until".into(),
            Field::FinalizeInherit => "finalize.inheritFinalizers".into(),
            Field::Version(i) => format!("spec.crd.versions[{}]", version(i)),
            Field::Schema(i, path) if path.is_empty() => format!("spec.crd.versions[{}].schema", version(i)),
            Field::Schema(i, path) => format!("spec.crd.versions[{}].schema.{path}", version(i)),
            Field::Conversion(i, to) => {
                let version = version(i);
                if *to {
                    format!("spec.{}", super::names::to_storage(&version))
                } else {
                    format!("spec.{}", super::names::from_storage(&version))
                }
            }
        })
    }
}
