//! Maps a position inside an embedded string (a template or a rule) to a position in the
//! file that holds it, for block scalars (`|`, `>`), quoted and plain scalars alike.

/// Where an embedded string starts in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPosition {
    /// The file name shown in errors.
    pub file: String,
    /// The file line holding the string's first line (1-based); 0 when not from a file.
    pub line: u64,
    /// Columns to add to a column inside the string.
    pub column_offset: u64,
}

impl FieldPosition {
    /// An origin for a string that did not come from a file: positions stay relative.
    pub fn detached(file: impl Into<String>) -> Self {
        FieldPosition {
            file: file.into(),
            line: 0,
            column_offset: 0,
        }
    }

    /// Locates a scalar whose YAML node starts at `line`:`column` (1-based) in `text`.
    /// A block scalar's content starts on the next line, at its indentation.
    pub fn of_scalar(file: &str, text: &str, line: u64, column: u64) -> Self {
        let lines: Vec<&str> = text.lines().collect();
        let at = |n: u64| lines.get((n as usize).wrapping_sub(1)).copied().unwrap_or("");
        let head = at(line);
        let indicator = head.chars().nth(column.saturating_sub(1) as usize);
        if matches!(indicator, Some('|') | Some('>')) {
            let first = (line + 1..=lines.len() as u64)
                .find(|&n| !at(n).trim().is_empty())
                .unwrap_or(line + 1);
            let indent = at(first).len() - at(first).trim_start().len();
            return FieldPosition {
                file: file.to_string(),
                line: line + 1,
                column_offset: indent as u64,
            };
        }
        let quoted = matches!(indicator, Some('"') | Some('\''));
        FieldPosition {
            file: file.to_string(),
            line,
            column_offset: column.saturating_sub(1) + u64::from(quoted),
        }
    }

    /// The file position of a place inside the string (`line`:`column`, 1-based), or of
    /// the string itself when there is none.
    pub fn position(&self, inner: Option<(u64, u64)>) -> (u64, u64) {
        match inner {
            Some((line, column)) => self.locate(line, column),
            None => (self.line, self.column_offset + u64::from(self.line > 0)),
        }
    }

    /// The file position of `line`:`column` (1-based) inside the string. Lines inside a
    /// block scalar map one to one; the first line of a flow scalar keeps its column.
    pub fn locate(&self, line: u64, column: u64) -> (u64, u64) {
        if self.line == 0 {
            return (line, column);
        }
        let file_line = self.line + line.saturating_sub(1);
        let file_column = if line <= 1 || self.column_offset > 0 {
            column + self.column_offset
        } else {
            column
        };
        (file_line, file_column)
    }
}

/// The 1-based line and column of a byte offset in `source`.
pub fn line_column(source: &str, offset: usize) -> (u64, u64) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() as u64 + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_scalar_content_starts_below_the_indicator() {
        let text = "children:\n  - template: |\n      kind: A\n      x: {{ y }}\n";
        let origin = FieldPosition::of_scalar("f.yaml", text, 2, 15);
        assert_eq!(origin.line, 3);
        assert_eq!(origin.column_offset, 6);
        assert_eq!(origin.locate(2, 4), (4, 10));
    }

    #[test]
    fn quoted_scalar_keeps_its_column() {
        let text = "when: '$.a['\n";
        let origin = FieldPosition::of_scalar("f.yaml", text, 1, 7);
        assert_eq!(origin.locate(1, 5), (1, 12));
    }

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ab", 0), (1, 1));
    }
}
