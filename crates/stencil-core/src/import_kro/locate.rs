//! Where a refused feature sits in the RGD's file: the line of its resource's `id`, then
//! of each key of the feature's path below it, searching down the text.

/// A file's lines.
pub(super) struct Lines<'a> {
    lines: Vec<&'a str>,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Lines {
            lines: text.lines().collect(),
        }
    }

    /// The 1-based line of `feature` (a dotted path, `spec.` and indices dropped) in the
    /// RGD named `rgd`, under the resource `resource` when there is one; the nearest line
    /// found when the text does not say.
    pub(super) fn of(&self, rgd: &str, resource: Option<&str>, feature: &str) -> u64 {
        let mut at = self.find(0, &[format!("name: {rgd}")]).unwrap_or(0);
        if let Some(id) = resource {
            let id_lines = [format!("id: {id}"), format!("id: \"{id}\""), format!("id: '{id}'")];
            at = self.find(at, &id_lines).unwrap_or(at);
        }
        for key in feature.split('.').filter(|k| !k.is_empty() && *k != "spec") {
            let key = key.split('[').next().unwrap_or(key);
            if let Some(line) = self.find(at, &[format!("{key}:")]) {
                at = line;
            }
        }
        at as u64 + 1
    }

    /// The first line from `from` on whose text, past indentation and a list's `- `,
    /// starts with one of `starts`.
    fn find(&self, from: usize, starts: &[String]) -> Option<usize> {
        (from..self.lines.len()).find(|&i| {
            let line = self.lines[i].trim_start().trim_start_matches("- ");
            starts.iter().any(|s| line.starts_with(s.as_str()))
        })
    }
}
