//! Template names inside a definition's environment, as errors show them.

/// The template of child `name`.
pub fn child(name: &str) -> String {
    format!("children[{name}].template")
}
/// The object of the child whose template is named `template` (a child written as an
/// object rather than a template), as [`child`] or [`finalize_child`] named it.
pub fn object(template: &str) -> String {
    format!("{}.object", template.strip_suffix(".template").unwrap_or(template))
}
/// The template of finalize child `name`.
pub fn finalize_child(name: &str) -> String {
    format!("finalize.children[{name}].template")
}
/// The name template of lookup `name`.
pub fn lookup_name(name: &str) -> String {
    format!("lookups[{name}].nameTemplate")
}
/// The namespace template of lookup `name`.
pub fn lookup_namespace(name: &str) -> String {
    format!("lookups[{name}].namespaceTemplate")
}
/// A templated value of lookup `name`'s selector, at `path` inside the selector.
pub fn lookup_selector(name: &str, path: &str) -> String {
    format!("lookups[{name}].selector.{path}")
}
/// The `toStorage` conversion template of CRD version `version`.
pub fn to_storage(version: &str) -> String {
    format!("crd.versions[{version}].conversion.toStorage")
}
/// The `fromStorage` conversion template of CRD version `version`.
pub fn from_storage(version: &str) -> String {
    format!("crd.versions[{version}].conversion.fromStorage")
}
/// The status template.
pub const STATUS: &str = "status.template";
/// The definition's shared macros, imported by name.
pub const HELPERS: &str = "helpers";
