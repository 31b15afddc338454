//! Which other children a child's template reads (`children.db`, `children['db']`), found
//! by scanning its text: a child that reads another that does not exist yet waits for it;
//! one that reads a collection of its own list waits until every member exists and is
//! ready, as `dependsOn` would; `stencil validate` hints at the other reads without
//! `dependsOn`.

/// The names among `entries`, other than `own`, that `template` reads as `children.<name>`
/// or `children['<name>']`, in the order of `entries`.
pub(crate) fn sibling_reads(template: &str, own: &str, entries: &[&str]) -> Vec<String> {
    let mut read = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find("children") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "children".len()..];
        rest = after;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let name: String = if let Some(attr) = after.strip_prefix('.') {
            attr.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        } else if let Some(index) = after.strip_prefix('[') {
            let index = index.trim_start();
            let Some(quote) = index.chars().next().filter(|c| *c == '\'' || *c == '"') else {
                continue;
            };
            index[1..].chars().take_while(|c| *c != quote).collect()
        } else {
            continue;
        };
        if name != own && entries.contains(&name.as_str()) && !read.contains(&name) {
            read.push(name);
        }
    }
    read.sort_by_key(|n| entries.iter().position(|e| e == n));
    read
}

/// Whether `template` imports the definition's helpers (`{% import "helpers" ... %}` or
/// `{% from "helpers" import ... %}`): its reads include the helpers' reads.
pub(crate) fn imports_helpers(template: &str) -> bool {
    ["\"helpers\"", "'helpers'"].iter().any(|quoted| {
        template.match_indices(quoted).any(|(at, _)| {
            let before = template[..at].trim_end();
            before.ends_with("import") || before.ends_with("from")
        })
    })
}

impl super::CompiledDefinition {
    /// Whether the entry at `index` reads `name` as a collection of its own list, which it
    /// waits for as a whole.
    pub fn reads_collection(&self, index: usize, name: &str) -> bool {
        self.entry_index(name).is_some_and(|r| {
            self.entry(r).collection
                && self.is_finalize(r) == self.is_finalize(index)
                && self.reads(index).iter().any(|n| n == name)
        })
    }

    /// Hints for entries whose template reads another child (not a collection) without
    /// `dependsOn` on it: such a child waits until the other exists, not until it is
    /// ready. A collection read needs no hint: the reader waits for every member to exist
    /// and be ready, as `dependsOn` would.
    pub fn hints(&self) -> Vec<String> {
        let mut hints = Vec::new();
        for (i, child) in self.entries() {
            let missing: Vec<&str> = self
                .reads(i)
                .iter()
                .filter(|r| !child.depends_on.contains(r) && !self.reads_collection(i, r))
                .map(String::as_str)
                .collect();
            if missing.is_empty() {
                continue;
            }
            let template = self.template_name(i);
            let at = self
                .origin(&template)
                .map_or_else(|| self.source.clone(), |o| format!("{}:{}", o.file, o.line));
            hints.push(format!(
                "{at}: hint: definition {}: {template} reads {} without `dependsOn: [{}]`; it waits until they exist, not until they are ready",
                self.name,
                missing.iter().map(|m| format!("children.{m}")).collect::<Vec<_>>().join(", "),
                missing.join(", ")
            ));
        }
        hints
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_of_the_helpers_is_recognised() {
        assert!(imports_helpers("{% import \"helpers\" as h %}"));
        assert!(imports_helpers("{%- from 'helpers' import labels %}"));
        assert!(!imports_helpers("name: helpers"));
        assert!(!imports_helpers("value: \"helpers\""));
    }

    #[test]
    fn attribute_and_index_reads_of_other_children_are_found() {
        let entries = ["db", "app", "cache"];
        let t = "{{ children.db.status.x }} {{ children['cache'] }} {{ children.app.metadata.name }}";
        assert_eq!(sibling_reads(t, "app", &entries), ["db", "cache"]);
    }

    #[test]
    fn other_words_and_unknown_names_are_not_reads() {
        let entries = ["db", "app"];
        let t = "{{ mychildren.db }} {{ parent.children.db }} {{ children.nothing }} {{ children | length }}";
        assert!(sibling_reads(t, "app", &entries).is_empty());
    }

    #[test]
    fn a_collection_read_orders_the_reader_after_it_and_a_cycle_through_it_is_named() {
        let def = |pods_depends_on: &str| {
            format!(
                "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: pools.example.com\nspec:\n  parent:\n    apiVersion: example.com/v1\n    kind: Pool\n  children:\n    - name: summary\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: s\n        data:\n          n: \"{{{{ children.pods | length }}}}\"\n    - name: pods\n      collection: true\n{pods_depends_on}      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: p\n"
            )
        };
        let (defs, diags) = crate::compile::compile_file("p.yaml", &def(""));
        assert!(diags.0.is_empty(), "{diags}");
        assert_eq!(defs[0].order(), [1, 0]);
        let (_, diags) = crate::compile::compile_file("p.yaml", &def("      dependsOn: [summary]\n"));
        let text = diags.to_string();
        assert!(text.contains("comes after the whole collection"), "{text}");
    }
}
