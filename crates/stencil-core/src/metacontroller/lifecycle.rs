//! Where one object stands in a controller's life, purely: whether its sync adds or takes
//! away the controller's finalizer, and which hook (if any) it calls, as metacontroller
//! decides for both controller kinds. A composite's parent is always selected; a
//! decorator's object stops being selected when its labels or annotations stop matching,
//! which, like a deletion, calls the finalize hook while the finalizer is on.

/// What a sync sees of its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// The controller has a finalize hook.
    pub finalize_hook: bool,
    /// The object carries the controller's finalizer.
    pub finalizer: bool,
    /// The object is being deleted.
    pub deleting: bool,
    /// The object matches the controller's selectors.
    pub selected: bool,
}

/// What happens to the controller's finalizer on the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finalizer {
    /// Left as it is.
    Keep,
    /// Added before anything else: the finalize hook will have its turn.
    Add,
    /// Taken away: the controller no longer has a finalize hook.
    Remove,
}

/// The hook a sync calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// The sync hook (`finalizing: false`).
    Sync,
    /// The finalize hook (`finalizing: true`); its `finalized: true` removes the finalizer.
    Finalize,
}

/// The steps of one sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps {
    /// The finalizer's change, made first.
    pub finalizer: Finalizer,
    /// The hook called after it, or none: the object is not the controller's concern.
    pub call: Option<Call>,
}

/// The steps of a sync of an object observed as `o`.
pub fn steps(o: Observed) -> Steps {
    let finalizer = match (o.finalize_hook, o.finalizer) {
        (false, true) => Finalizer::Remove,
        (true, false) if o.selected && !o.deleting => Finalizer::Add,
        _ => Finalizer::Keep,
    };
    let holds = matches!(finalizer, Finalizer::Add) || (o.finalizer && o.finalize_hook);
    let call = if o.deleting || !o.selected {
        // Past its life (deleted or opted out): only a finalize hook that holds it still
        // has work; without one the garbage collector takes the children and any
        // attachment stays.
        holds.then_some(Call::Finalize)
    } else {
        Some(Call::Sync)
    };
    Steps { finalizer, call }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(finalize_hook: bool, finalizer: bool, deleting: bool, selected: bool) -> Observed {
        Observed {
            finalize_hook,
            finalizer,
            deleting,
            selected,
        }
    }

    #[test]
    fn a_live_selected_object_syncs_and_gets_the_finalizer_when_a_finalize_hook_exists() {
        assert_eq!(
            steps(observed(true, false, false, true)),
            Steps {
                finalizer: Finalizer::Add,
                call: Some(Call::Sync)
            }
        );
        assert_eq!(
            steps(observed(false, false, false, true)),
            Steps {
                finalizer: Finalizer::Keep,
                call: Some(Call::Sync)
            }
        );
    }

    #[test]
    fn a_deleted_or_deselected_object_is_finalized_only_while_the_finalizer_holds_it() {
        for (deleting, selected) in [(true, true), (false, false), (true, false)] {
            assert_eq!(
                steps(observed(true, true, deleting, selected)).call,
                Some(Call::Finalize)
            );
            assert_eq!(steps(observed(true, false, deleting, selected)).call, None);
            assert_eq!(steps(observed(false, false, deleting, selected)).call, None);
        }
        assert_eq!(
            steps(observed(true, false, true, true)).finalizer,
            Finalizer::Keep,
            "a deleted object gets no new finalizer"
        );
    }

    #[test]
    fn a_finalizer_without_a_finalize_hook_is_removed_and_nothing_finalizes() {
        let s = steps(observed(false, true, true, true));
        assert_eq!(s.finalizer, Finalizer::Remove);
        assert_eq!(s.call, None);
        assert_eq!(steps(observed(false, true, false, true)).call, Some(Call::Sync));
    }
}
