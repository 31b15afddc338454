//! The order children are rendered in: each after the children it depends on
//! (`dependsOn`) and after every collection of its own list that its template reads, in
//! declaration order otherwise; unknown names, names of the other list and cycles are
//! reported.

use std::collections::BTreeMap;

use super::CompileError;
use super::document::Report;
use super::field::Field;
use crate::definition::Child;

/// Orders one list of children (`children`, or `finalize.children` numbered from
/// `offset`) so each comes after what it depends on, and after every collection of the
/// same list it reads (it waits for the whole collection); `reads` holds what each child
/// reads of its siblings, numbered as the children then the finalize children. Reports
/// unknown names, names of the other list, and cycles.
pub(super) fn dependency_order(
    children: &[Child],
    other: &[Child],
    offset: usize,
    reads: &[Vec<String>],
    report: Report<'_>,
) -> Option<Vec<usize>> {
    let index: BTreeMap<&str, usize> = children.iter().enumerate().map(|(i, c)| (c.name.as_str(), i)).collect();
    if !dependencies_known(children, other, offset, &index, report) {
        return None;
    }
    let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
    let deps: Vec<Vec<usize>> = children
        .iter()
        .enumerate()
        .map(|(i, child)| {
            let read = reads.get(offset + i).map(Vec::as_slice).unwrap_or_default();
            let collections = read
                .iter()
                .filter(|r| index.get(r.as_str()).is_some_and(|&j| children[j].collection));
            child
                .depends_on
                .iter()
                .chain(collections)
                .map(|d| index[d.as_str()])
                .collect()
        })
        .collect();
    match topological(&deps) {
        Ok(order) => Some(order.into_iter().map(|i| offset + i).collect()),
        Err(cycle) => {
            let path: Vec<&str> = cycle.iter().map(|&c| names[c]).collect();
            let through_reads = cycle
                .windows(2)
                .any(|w| !children[w[0]].depends_on.iter().any(|d| d == names[w[1]]));
            let mut message = path.join(" -> ");
            if through_reads {
                message.push_str(" (a child that reads a collection comes after the whole collection)");
            }
            report(
                Field::ChildDependsOn(offset + cycle[0]),
                CompileError::Cycle(message),
                None,
            );
            None
        }
    }
}

/// Whether every `dependsOn` names another child of the same list; reports each that
/// does not.
fn dependencies_known(
    children: &[Child],
    other: &[Child],
    offset: usize,
    index: &BTreeMap<&str, usize>,
    report: Report<'_>,
) -> bool {
    let mut ok = true;
    for (i, child) in children.iter().enumerate() {
        for dep in &child.depends_on {
            let field = Field::ChildDependsOn(offset + i);
            if dep == &child.name {
                report(field, CompileError::Cycle(format!("{0} -> {0}", child.name)), None);
                ok = false;
            } else if other.iter().any(|o| &o.name == dep) {
                let hint = if offset == 0 {
                    format!("`{dep}` is a finalize child, rendered only on deletion; a child cannot depend on it")
                } else {
                    format!(
                        "`{dep}` is not a finalize child; a finalize child may depend only on other finalize children (use `finalize.until` to wait on the others)"
                    )
                };
                report(field, CompileError::Invalid(hint), None);
                ok = false;
            } else if !index.contains_key(dep.as_str()) {
                report(field, CompileError::UnknownDependency(dep.clone()), None);
                ok = false;
            }
        }
    }
    ok
}

#[derive(Clone, Copy, PartialEq)]
enum Mark {
    New,
    Open,
    Done,
}

/// A depth-first walk of the dependency graph.
struct Walk<'a> {
    deps: &'a [Vec<usize>],
    marks: Vec<Mark>,
    stack: Vec<usize>,
    order: Vec<usize>,
}

/// Each node after the nodes it depends on, visiting in declaration order so that the
/// order is stable; or the first cycle found, as the path that closes it.
fn topological(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let mut walk = Walk {
        deps,
        marks: vec![Mark::New; deps.len()],
        stack: Vec::new(),
        order: Vec::with_capacity(deps.len()),
    };
    for i in 0..deps.len() {
        walk.stack.clear();
        walk.visit(i)?;
    }
    Ok(walk.order)
}

impl Walk<'_> {
    fn visit(&mut self, i: usize) -> Result<(), Vec<usize>> {
        match self.marks[i] {
            Mark::Done => return Ok(()),
            Mark::Open => {
                let start = self.stack.iter().position(|&s| s == i).unwrap_or(0);
                let mut cycle = self.stack[start..].to_vec();
                cycle.push(i);
                return Err(cycle);
            }
            Mark::New => {}
        }
        self.marks[i] = Mark::Open;
        self.stack.push(i);
        for &dep in &self.deps[i] {
            self.visit(dep)?;
        }
        self.stack.pop();
        self.marks[i] = Mark::Done;
        self.order.push(i);
        Ok(())
    }
}
