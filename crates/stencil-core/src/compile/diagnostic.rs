//! A compile error with its place: the file, the definition, the field, and the line and
//! column inside the file, so editors and CI logs can jump to it.

use std::fmt;

/// Where a compile error sits and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file, or `OperatorDefinition/<name>` for a definition read from the cluster.
    pub file: String,
    /// 1-based line in the file (or in the template, for a cluster definition); 0 if unknown.
    pub line: u64,
    /// 1-based column; 0 if unknown.
    pub column: u64,
    /// The definition's `metadata.name`, when known.
    pub definition: Option<String>,
    /// The field inside the definition, e.g. `children[statefulset].template`.
    pub field: Option<String>,
    /// What is wrong.
    pub error: super::CompileError,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if let Some(def) = &self.definition {
            write!(f, "definition {def}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.error)
    }
}

/// Every error found in one file or definition, in source order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
