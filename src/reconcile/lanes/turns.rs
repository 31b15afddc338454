//! Parents waiting in a lane, namespace by namespace: first-come within a namespace, and
//! the namespaces served in turn, one parent each. A burst of parents in one namespace
//! then delays another namespace's parent by one pass, not by the whole burst: the
//! fairness the API server's priority and fairness gives its clients, by namespace.
//! Cluster-scoped parents share one turn.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};

use super::ParentKey;

/// Parents waiting, in namespace turns; each parent waits once.
#[derive(Default)]
pub(super) struct Turns {
    /// Each namespace's parents, oldest first.
    waiting: HashMap<Option<String>, VecDeque<ParentKey>>,
    /// The namespaces with a parent waiting, the next one's turn first.
    order: VecDeque<Option<String>>,
    /// The parents still waiting: one removed keeps its place in `waiting` until its
    /// turn comes and is skipped then, or until the lines are compacted, so a removal
    /// costs no search.
    wanted: HashSet<ParentKey>,
    /// The places in `waiting`, kept or skipped-to-be: past twice `wanted` (and
    /// [`SLACK`]) the lines drop their skipped places, so parents held and removed
    /// again and again while the lane does not drain cost a bounded amount.
    places: usize,
}

/// Skipped places tolerated before the lines are compacted, so a small lane never is.
const SLACK: usize = 64;

impl Turns {
    /// Adds a parent at the end of its namespace's line, unless it waits already.
    pub(super) fn push(&mut self, parent: ParentKey) {
        if !self.wanted.insert(parent.clone()) {
            return;
        }
        self.places += 1;
        match self.waiting.entry(parent.namespace.clone()) {
            Entry::Occupied(mut line) => line.get_mut().push_back(parent),
            Entry::Vacant(line) => {
                self.order.push_back(line.key().clone());
                line.insert(VecDeque::from([parent]));
            }
        }
    }

    /// Whether `parent` waits.
    pub(super) fn contains(&self, parent: &ParentKey) -> bool {
        self.wanted.contains(parent)
    }

    /// Takes `parent` out.
    pub(super) fn remove(&mut self, parent: &ParentKey) {
        self.wanted.remove(parent);
        if self.places > 2 * self.wanted.len() + SLACK {
            self.compact();
        }
    }

    /// Drops the skipped places; a parent removed and added again keeps its first place.
    fn compact(&mut self) {
        let mut kept = HashSet::with_capacity(self.wanted.len());
        for line in self.waiting.values_mut() {
            line.retain(|parent| self.wanted.contains(parent) && kept.insert(parent.clone()));
        }
        self.waiting.retain(|_, line| !line.is_empty());
        self.order.retain(|namespace| self.waiting.contains_key(namespace));
        self.places = kept.len();
    }

    /// Whether no parent waits.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.wanted.is_empty()
    }

    /// The oldest parent of the namespace whose turn it is; that namespace's next turn
    /// comes after every other namespace's.
    pub(super) fn pop(&mut self) -> Option<ParentKey> {
        while let Some(namespace) = self.order.pop_front() {
            let Entry::Occupied(mut line) = self.waiting.entry(namespace) else {
                continue;
            };
            while let Some(parent) = line.get_mut().pop_front() {
                self.places -= 1;
                if self.wanted.remove(&parent) {
                    if line.get().is_empty() {
                        line.remove();
                    } else {
                        self.order.push_back(line.key().clone());
                    }
                    return Some(parent);
                }
            }
            line.remove();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{ApiResource, DynamicObject};
    use kube::runtime::reflector::ObjectRef;

    fn parent(namespace: Option<&str>, name: &str) -> ParentKey {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let r = ObjectRef::<DynamicObject>::new_with(name, ar);
        match namespace {
            Some(ns) => r.within(ns),
            None => r,
        }
    }

    fn drain(turns: &mut Turns) -> Vec<String> {
        std::iter::from_fn(|| turns.pop()).map(|p| p.name).collect()
    }

    #[test]
    fn a_burst_in_one_namespace_lets_another_namespace_in_after_one_parent() {
        let mut turns = Turns::default();
        for i in 0..100 {
            turns.push(parent(Some("burst"), &format!("b{i}")));
        }
        assert_eq!(turns.pop().map(|p| p.name), Some("b0".into()));
        turns.push(parent(Some("quiet"), "q0"));
        turns.push(parent(None, "cluster"));
        assert_eq!(
            drain(&mut turns)[..5],
            ["b1", "q0", "cluster", "b2", "b3"],
            "the newcomers' turns come after the burst's next parent, then the burst goes on"
        );
    }

    #[test]
    fn within_a_namespace_parents_go_first_come() {
        let mut turns = Turns::default();
        for name in ["a", "b", "c"] {
            turns.push(parent(Some("ns"), name));
        }
        turns.push(parent(Some("other"), "x"));
        turns.push(parent(Some("other"), "y"));
        assert_eq!(drain(&mut turns), ["a", "x", "b", "y", "c"]);
        assert!(turns.is_empty());
    }

    #[test]
    fn a_parent_waits_once_and_a_removed_one_is_skipped() {
        let mut turns = Turns::default();
        turns.push(parent(Some("ns"), "a"));
        turns.push(parent(Some("ns"), "b"));
        turns.push(parent(Some("ns"), "a"));
        turns.remove(&parent(Some("ns"), "a"));
        assert!(!turns.contains(&parent(Some("ns"), "a")));
        assert_eq!(drain(&mut turns), ["b"], "a waited once and was removed");
    }

    #[test]
    fn a_parent_removed_and_added_again_goes_once_from_its_first_place() {
        let mut turns = Turns::default();
        turns.push(parent(Some("ns"), "a"));
        turns.push(parent(Some("ns"), "b"));
        turns.remove(&parent(Some("ns"), "a"));
        turns.push(parent(Some("ns"), "a"));
        assert_eq!(drain(&mut turns), ["a", "b"]);
        assert!(turns.pop().is_none(), "its second place is skipped");
    }

    #[test]
    fn parents_removed_again_and_again_leave_no_trail_and_the_rest_keep_their_order() {
        let mut turns = Turns::default();
        turns.push(parent(Some("burst"), "first"));
        turns.push(parent(Some("quiet"), "q"));
        for round in 0..1000 {
            let churn = parent(Some("burst"), &format!("c{}", round % 10));
            turns.push(churn.clone());
            turns.remove(&churn);
        }
        turns.push(parent(Some("burst"), "last"));
        assert!(
            turns.places <= 2 * 3 + SLACK,
            "{} places kept for 3 parents",
            turns.places
        );
        assert_eq!(drain(&mut turns), ["first", "q", "last"]);
        assert_eq!(turns.places, 0);
    }
}
