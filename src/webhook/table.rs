//! Which loaded definition converts which CRD. Every replica keeps this table from its
//! own sources, leader or not, so conversion goes on through a failover.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::compile::CompiledDefinition;
use crate::source::{Origin, SourceEvent};

/// Each converting CRD's name, with the source and definition that install it.
type Table = HashMap<String, (Origin, Arc<CompiledDefinition>)>;

/// The definitions that convert, by the name of the CRD they install.
#[derive(Clone, Default)]
pub struct Conversions {
    by_crd: Arc<RwLock<Table>>,
}

impl Conversions {
    /// An empty table.
    pub fn new() -> Conversions {
        Conversions::default()
    }

    /// The definition that converts CRD `crd`, if one is loaded.
    pub fn get(&self, crd: &str) -> Option<Arc<CompiledDefinition>> {
        let table = self.by_crd.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        table.get(crd).map(|(_, def)| def.clone())
    }

    /// Follows one source event: a definition that converts is added or replaced, and one
    /// that is gone (or no longer converts) is dropped. An edit that does not compile
    /// leaves the last good version converting.
    pub fn observe(&self, event: &SourceEvent) {
        let mut table = self.by_crd.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            SourceEvent::Upsert(origin, def) => {
                table.retain(|_, (o, _)| o != origin);
                if def.converts()
                    && let Some(name) = crate::crd::crd_name(def)
                {
                    table.insert(name, (origin.clone(), Arc::new((**def).clone())));
                }
            }
            SourceEvent::Remove(origin) => table.retain(|_, (o, _)| o != origin),
            SourceEvent::Invalid(..) | SourceEvent::FileInvalid(..) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn website() -> Box<CompiledDefinition> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml");
        let (mut defs, _) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
        Box::new(defs.remove(0))
    }

    #[test]
    fn a_definition_converts_until_it_is_removed() {
        let table = Conversions::new();
        let origin = Origin::File {
            path: "website.yaml".into(),
            name: "websites.examples.stencil.dev".into(),
        };
        table.observe(&SourceEvent::Upsert(origin.clone(), website()));
        let def = table
            .get("websites.examples.stencil.dev")
            .expect("the website converts");
        assert_eq!(def.name, "websites.examples.stencil.dev");
        table.observe(&SourceEvent::Invalid(origin.clone(), Default::default()));
        assert!(table.get("websites.examples.stencil.dev").is_some());
        table.observe(&SourceEvent::Remove(origin));
        assert!(table.get("websites.examples.stencil.dev").is_none());
    }
}
