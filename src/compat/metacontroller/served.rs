//! A controller object as its syncs see it, whichever its kind: its name, the object the
//! hooks receive, its hooks (sync, finalize, customize), its resync period and what sets a CompositeController apart
//! from a DecoratorController (how children are claimed, which objects it serves, which
//! finalizer it writes).

use kube::ResourceExt as _;
use serde_json::Value;

use crate::metacontroller::api::{CompositeController, DecoratorController, DecoratorResourceRule, Hook};
use crate::metacontroller::hook::Shape;
use crate::metacontroller::{composite_finalizer, decorate, decorator_finalizer};

/// A controller object being served.
#[derive(Debug, Clone)]
pub(super) struct Served {
    pub(super) name: String,
    /// The object as hooks receive it.
    pub(super) object: Value,
    pub(super) sync: Option<Hook>,
    pub(super) finalize: Option<Hook>,
    pub(super) customize: Option<Hook>,
    pub(super) resync_period_seconds: Option<i32>,
    /// A change of an object's status alone does not sync it.
    pub(super) ignore_status_changes: bool,
    pub(super) role: Role,
}

/// What sets the two controller kinds apart.
#[derive(Debug, Clone)]
pub(super) enum Role {
    /// A CompositeController: children claimed by selector, orphans adopted.
    Composite { generate_selector: bool },
    /// A DecoratorController, for the objects of one of its resource rules: attachments
    /// claimed by controller reference and annotation.
    Decorator { rule: DecoratorResourceRule },
}

impl Served {
    /// A CompositeController.
    pub(super) fn composite(cc: &CompositeController) -> Served {
        let hooks = cc.spec.hooks.clone().unwrap_or_default();
        Served {
            name: cc.name_any(),
            object: serde_json::to_value(cc).unwrap_or_default(),
            sync: hooks.sync,
            finalize: hooks.finalize,
            customize: hooks.customize,
            resync_period_seconds: cc.spec.resync_period_seconds,
            ignore_status_changes: cc.spec.parent_resource.ignore_status_changes.unwrap_or(false),
            role: Role::Composite {
                generate_selector: cc.spec.generate_selector.unwrap_or(false),
            },
        }
    }

    /// A DecoratorController, for the objects `rule` selects.
    pub(super) fn decorator(dc: &DecoratorController, rule: DecoratorResourceRule) -> Served {
        let hooks = dc.spec.hooks.clone().unwrap_or_default();
        Served {
            name: dc.name_any(),
            object: serde_json::to_value(dc).unwrap_or_default(),
            sync: hooks.sync,
            finalize: hooks.finalize,
            customize: hooks.customize,
            resync_period_seconds: dc.spec.resync_period_seconds,
            ignore_status_changes: rule.ignore_status_changes.unwrap_or(false),
            role: Role::Decorator { rule },
        }
    }

    /// The finalizer it puts on the objects it serves while it has a finalize hook.
    pub(super) fn finalizer(&self) -> String {
        match self.role {
            Role::Composite { .. } => composite_finalizer(&self.name),
            Role::Decorator { .. } => decorator_finalizer(&self.name),
        }
    }

    /// Its name in metrics: `CompositeController/NAME` or `DecoratorController/NAME`.
    pub(super) fn metric_name(&self) -> String {
        match self.role {
            Role::Composite { .. } => format!("CompositeController/{}", self.name),
            Role::Decorator { .. } => format!("DecoratorController/{}", self.name),
        }
    }

    /// The shape of its hooks' requests and answers.
    pub(super) fn shape(&self) -> Shape {
        match self.role {
            Role::Composite { .. } => Shape::Composite,
            Role::Decorator { .. } => Shape::Decorator,
        }
    }

    /// Whether `object` is one it serves (a composite serves every parent it watches).
    pub(super) fn selects(&self, object: &Value) -> Result<bool, String> {
        match &self.role {
            Role::Composite { .. } => Ok(true),
            Role::Decorator { rule } => decorate::matches(rule, object).map_err(|e| e.to_string()),
        }
    }

    /// Its name where attachments carry it: a decorator's only.
    pub(super) fn decorator_name(&self) -> Option<&str> {
        matches!(self.role, Role::Decorator { .. }).then_some(self.name.as_str())
    }
}
