//! The order children are rendered in: each after the children it depends on
//! (`dependsOn`) and after every collection of its own list that its template reads, in
//! declaration order otherwise; unknown names, names of the other list and cycles are
//! reported.

use std::collections::BTreeMap;

use super::CompileError;
use super::document::Field;
use super::document::Report;
use crate::definition::Child;

/// Orders one list of children (`children`, or `finalize.children` numbered from
/// `offset`) so each comes after what it depends on, and after every collection of the
/// same list its template reads (it waits for the whole collection); reports unknown
/// names, names of the other list, and cycles.
pub(super) fn dependency_order(
    children: &[Child],
    other: &[Child],
    offset: usize,
    report: Report<'_>,
) -> Option<Vec<usize>> {
    let index: BTreeMap<&str, usize> = children.iter().enumerate().map(|(i, c)| (c.name.as_str(), i)).collect();
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
    if !ok {
        return None;
    }
    let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
    let deps: Vec<Vec<usize>> = children
        .iter()
        .map(|child| {
            let read = super::reads::sibling_reads(&child.template, &child.name, &names);
            let collections = read.iter().filter(|r| children[index[r.as_str()]].collection);
            child
                .depends_on
                .iter()
                .chain(collections)
                .map(|d| index[d.as_str()])
                .collect()
        })
        .collect();
    // Depth-first, visiting children in declaration order so the order is stable.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        i: usize,
        deps: &[Vec<usize>],
        marks: &mut [Mark],
        stack: &mut Vec<usize>,
        order: &mut Vec<usize>,
    ) -> Result<(), Vec<usize>> {
        match marks[i] {
            Mark::Done => return Ok(()),
            Mark::Open => {
                let start = stack.iter().position(|&s| s == i).unwrap_or(0);
                let mut cycle = stack[start..].to_vec();
                cycle.push(i);
                return Err(cycle);
            }
            Mark::New => {}
        }
        marks[i] = Mark::Open;
        stack.push(i);
        for &dep in &deps[i] {
            visit(dep, deps, marks, stack, order)?;
        }
        stack.pop();
        marks[i] = Mark::Done;
        order.push(i);
        Ok(())
    }
    let mut marks = vec![Mark::New; children.len()];
    let mut order = Vec::with_capacity(children.len());
    for i in 0..children.len() {
        let mut stack = Vec::new();
        if let Err(cycle) = visit(i, &deps, &mut marks, &mut stack, &mut order) {
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
            return None;
        }
    }
    Some(order.into_iter().map(|i| offset + i).collect())
}
