//! The sharding decisions, each with the case that shows it.

use super::*;

fn members(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("stencil-{i}")).collect()
}

fn uids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("8c1d2e3f-0000-4000-8000-{i:012}")).collect()
}

fn ready(names: &[String]) -> Ring {
    Ring::new(names.iter().map(|m| (m.clone(), MemberState::Ready)))
}

fn shares(uids: &[String], names: &[String]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for uid in uids {
        let owner = owner(uid, names.iter().map(String::as_str)).unwrap();
        *out.entry(owner.to_string()).or_insert(0) += 1;
    }
    out
}

#[test]
fn three_members_share_three_hundred_parents_within_a_quarter_of_even() {
    let names = members(3);
    let shares = shares(&uids(300), &names);
    assert_eq!(shares.len(), 3, "{shares:?}");
    for (m, n) in &shares {
        assert!((75..=125).contains(n), "{m} has {n} of 300: {shares:?}");
    }
}

#[test]
fn a_joining_member_takes_parents_only_for_itself() {
    let before = members(3);
    let after = members(4);
    let mut moved = 0;
    for uid in uids(1000) {
        let old = owner(&uid, before.iter().map(String::as_str)).unwrap();
        let new = owner(&uid, after.iter().map(String::as_str)).unwrap();
        if old != new {
            assert_eq!(new, "stencil-3", "a parent moved between old members");
            moved += 1;
        }
    }
    assert!((150..=350).contains(&moved), "about a quarter moves: {moved}");
}

#[test]
fn a_leaving_member_spreads_only_its_own_parents() {
    let before = members(3);
    let after = [before[0].clone(), before[2].clone()];
    for uid in uids(500) {
        let old = owner(&uid, before.iter().map(String::as_str)).unwrap();
        let new = owner(&uid, after.iter().map(String::as_str)).unwrap();
        assert!(old == new || old == "stencil-1", "{uid} moved from {old} to {new}");
    }
}

#[test]
fn ownership_does_not_depend_on_the_order_of_members() {
    let names = members(5);
    let reversed: Vec<&str> = names.iter().rev().map(String::as_str).collect();
    for uid in uids(50) {
        assert_eq!(
            owner(&uid, names.iter().map(String::as_str)),
            owner(&uid, reversed.iter().copied())
        );
    }
    assert_eq!(owner("x", std::iter::empty()), None);
}

#[test]
fn the_sharder_assigns_drains_waits_and_reassigns_from_the_gone() {
    let names = members(2);
    let uid = uids(1).remove(0);
    let target = owner(&uid, names.iter().map(String::as_str)).unwrap().to_string();
    let other = names.iter().find(|m| **m != target).unwrap().clone();
    fn at<'a>(uid: &'a str, shard: Option<&'a str>, draining: bool) -> Placement<'a> {
        Placement { uid, shard, draining }
    }
    let ring = ready(&names);
    assert_eq!(plan(at(&uid, None, false), &ring), Some(Move::Assign(target.clone())));
    assert_eq!(plan(at(&uid, Some(&target), false), &ring), None);
    assert_eq!(plan(at(&uid, Some(&other), false), &ring), Some(Move::Drain));
    assert_eq!(
        plan(at(&uid, Some(&other), true), &ring),
        None,
        "waits for the acknowledgement"
    );

    let expired = Ring::new([
        (target.clone(), MemberState::Ready),
        (other.clone(), MemberState::Expired),
    ]);
    assert_eq!(
        plan(at(&uid, Some(&other), true), &expired),
        None,
        "an expired member is not fenced out until its Lease is taken"
    );
    let gone = Ring::new([(target.clone(), MemberState::Ready)]);
    assert_eq!(
        plan(at(&uid, Some(&other), true), &gone),
        Some(Move::Assign(target.clone())),
        "a drain its member died in moves at once"
    );
    assert_eq!(
        plan(at(&uid, None, false), &Ring::default()),
        None,
        "no member, no move"
    );
}

#[test]
fn a_member_reconciles_its_own_releases_the_draining_and_skips_the_rest() {
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let mine = labels(&[(SHARD, "a")]);
    let draining = labels(&[(SHARD, "a"), (DRAIN, "true")]);
    let theirs = labels(&[(SHARD, "b")]);
    assert_eq!(duty(Placement::of("u", Some(&mine)), "a"), Duty::Reconcile);
    assert_eq!(duty(Placement::of("u", Some(&draining)), "a"), Duty::Release);
    assert_eq!(duty(Placement::of("u", Some(&theirs)), "a"), Duty::Skip);
    assert_eq!(duty(Placement::of("u", None), "a"), Duty::Skip);
}

#[test]
fn a_lease_expires_a_duration_after_its_last_renewal_was_seen() {
    let start = Instant::now();
    let second = Duration::from_secs(1);
    let mut leases = Leases::new(15 * second);
    // The renewTime says ten minutes in the future (a skewed clock): it is not read.
    leases.observe("a", Some("a"), "2099-01-01T00:00:00Z", start);
    assert_eq!(leases.ring(start + 14 * second).state("a"), Some(MemberState::Ready));
    leases.observe("a", Some("a"), "2099-01-01T00:00:00Z", start + 10 * second);
    assert_eq!(
        leases.ring(start + 16 * second).state("a"),
        Some(MemberState::Expired),
        "the same renewal seen again is no renewal"
    );
    leases.observe("a", Some("a"), "2099-01-01T00:00:02Z", start + 16 * second);
    assert_eq!(leases.ring(start + 30 * second).state("a"), Some(MemberState::Ready));
    assert_eq!(leases.next_expiry(start + 30 * second), Some(start + 31 * second));
    leases.observe("a", Some("sharder"), "2099-01-01T00:00:03Z", start + 31 * second);
    assert_eq!(leases.ring(start + 31 * second).state("a"), None, "taken over: gone");
    leases.observe("b", Some("b"), "t", start);
    leases.remove("b");
    assert_eq!(leases.ring(start).ready().count(), 0);
}

#[test]
fn a_lease_without_holder_for_a_duration_is_a_departed_members() {
    let start = Instant::now();
    let second = Duration::from_secs(1);
    let mut leases = Leases::new(15 * second);
    // A starting member's Lease, then its first renewal a second later.
    leases.observe("new", None, "", start);
    leases.observe("new", Some("new"), "t1", start + second);
    // A member that shut down cleanly and released its Lease.
    leases.observe("gone", None, "", start);
    assert!(leases.departed(start + 14 * second).is_empty());
    assert_eq!(leases.departed(start + 15 * second), ["gone"]);
    leases.remove("gone");
    assert!(leases.departed(start + 60 * second).is_empty());
}
