//! The three-way merge that makes round trips lossless, and the check that finds what a
//! round trip would lose.

use serde_json::{Map, Value};

/// The storage version's value of a field after a round trip through a version that
/// cannot hold all of it. `saved` is the value before the trip, `base` what the other
/// version made of it, and `new` what it holds now. Where `new` still equals `base` the
/// client did not touch the field, so the saved value comes back; where it differs the
/// client changed it, and the change wins.
pub(super) fn restore(saved: Option<&Value>, base: Option<&Value>, new: Option<&Value>) -> Option<Value> {
    if saved == base {
        return new.cloned();
    }
    match (saved, base, new) {
        (Some(Value::Object(s)), None | Some(Value::Object(_)), Some(Value::Object(n))) => {
            let b = base.and_then(Value::as_object);
            let mut out = Map::new();
            for key in n.keys().chain(s.keys()).chain(b.into_iter().flat_map(Map::keys)) {
                if out.contains_key(key) {
                    continue;
                }
                if let Some(v) = restore(s.get(key), b.and_then(|b| b.get(key)), n.get(key)) {
                    out.insert(key.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        _ if new == base => saved.cloned(),
        _ => new.cloned(),
    }
}

/// The paths (`.spec.domains`) where `after` differs from `before`: what a round trip
/// lost or changed.
pub fn lost_fields(before: &Value, after: &Value) -> Vec<String> {
    let mut lost = Vec::new();
    for section in ["spec", "status"] {
        walk(
            &format!(".{section}"),
            before.get(section),
            after.get(section),
            &mut lost,
        );
    }
    lost
}

fn walk(path: &str, before: Option<&Value>, after: Option<&Value>, lost: &mut Vec<String>) {
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            for key in b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))) {
                walk(&format!("{path}.{key}"), b.get(key), a.get(key), lost);
            }
        }
        (b, a) if b != a => lost.push(path.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(saved: Value, base: Value, new: Value) -> Value {
        restore(Some(&saved), Some(&base), Some(&new)).unwrap()
    }

    #[test]
    fn an_untouched_field_comes_back_and_a_changed_one_wins() {
        let saved = json!({"domains": ["a", "b"], "tls": true});
        let base = json!({"domains": ["a"]});
        assert_eq!(r(saved.clone(), base.clone(), json!({"domains": ["a"]})), saved);
        assert_eq!(
            r(saved, base, json!({"domains": ["c"]})),
            json!({"domains": ["c"], "tls": true})
        );
    }

    #[test]
    fn a_field_the_other_version_holds_follows_the_client() {
        let saved = json!({"image": "a", "extra": 1});
        let base = json!({"image": "a"});
        assert_eq!(r(saved.clone(), base.clone(), json!({})), json!({"extra": 1}));
        assert_eq!(r(saved, base, json!({"image": "b"})), json!({"image": "b", "extra": 1}));
    }

    #[test]
    fn lost_fields_name_each_path() {
        let before = json!({"spec": {"a": 1, "b": {"c": [1, 2]}}, "status": {"x": 1}});
        let after = json!({"spec": {"a": 1, "b": {"c": [1]}, "d": 2}});
        assert_eq!(lost_fields(&before, &after), vec![".spec.b.c", ".spec.d", ".status"]);
    }

    #[test]
    fn a_list_comes_back_whole_or_is_replaced_whole() {
        // v1 adds `appProtocol` to each port; the old version shows ports without it.
        let saved = json!({"ports": [{"port": 80, "appProtocol": "http"}, {"port": 443, "appProtocol": "https"}]});
        let base = json!({"ports": [{"port": 80}, {"port": 443}]});
        assert_eq!(
            r(saved.clone(), base.clone(), base.clone()),
            saved,
            "left alone: restored whole"
        );
        let edited = json!({"ports": [{"port": 80}, {"port": 8443}]});
        assert_eq!(
            r(saved, base, edited.clone()),
            edited,
            "one item edited: the list is replaced, every item's hub-only field goes"
        );
    }
}
