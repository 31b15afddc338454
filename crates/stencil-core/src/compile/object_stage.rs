//! The compile stage of a child written as an object: its object and `forEach`
//! compiled, each expression placed in the file, and what it reads of its siblings.

use std::sync::Arc;

use super::cel_object::{self, ObjectChild};
use super::field::Field;
use super::stages::Compilation;
use super::{CompileError, names};
use crate::cel_dialect::CelError;
use crate::definition::Child;

impl Compilation<'_> {
    /// Compiles child `i`'s `object` and `forEach` (its template is named `name`): each
    /// expression's field is placed in the file, and each that does not parse is
    /// reported there.
    pub(super) fn object(&mut self, i: usize, name: &str, child: &Child, object: &serde_json::Value) {
        let whole = Field::ChildObject(i, String::new());
        if !child.template.is_empty() {
            let message = "has both a template and an object; write one of them".to_string();
            self.report(whole.clone(), CompileError::Invalid(message), None);
        }
        if child.collection == child.for_each.is_empty() {
            let message =
                "an object renders a collection with `forEach` and `collection: true`, both or neither".to_string();
            self.report(whole.clone(), CompileError::Invalid(message), None);
        }
        let object_name = names::object(name);
        self.origins.insert(object_name.clone(), self.locator.origin(&whole));
        let for_each = cel_object::compile_for_each(&child.for_each).map_err(|errors| {
            for (path, message) in errors {
                self.report(Field::ChildObject(i, path), CompileError::Invalid(message), None);
            }
        });
        let compiled = cel_object::compile(object).map_err(|errors| {
            for e in errors {
                let column = match e.error {
                    CelError::Unclosed { column } | CelError::Parse { column, .. } => column as u64,
                    _ => 1,
                };
                let error = CompileError::Invalid(e.error.to_string());
                self.report(Field::ChildObject(i, e.path), error, Some((1, column)));
            }
        });
        let (Ok(object), Ok(for_each)) = (compiled, for_each) else {
            self.objects.push(None);
            return;
        };
        for path in object.expression_paths() {
            let origin = self.locator.origin(&Field::ChildObject(i, path.clone()));
            self.origins.insert(format!("{object_name}.{path}"), origin);
        }
        self.objects.push(Some(Arc::new(ObjectChild { object, for_each })));
    }
}

/// The siblings an object child's expressions read by name (`names` are every child's).
pub(super) fn object_reads(child: &ObjectChild, own: &str, names: &[&str]) -> Vec<String> {
    let variables = child.variables();
    names
        .iter()
        .filter(|n| **n != own && variables.contains(**n))
        .map(|n| n.to_string())
        .collect()
}
