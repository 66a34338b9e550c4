//! `group_by` outside recursion: a hash map of groups instead of differential's `reduce`.
//!
//! A `reduce` arranges its input — every (key, value) pair, sorted — and its output, and
//! replays a key's history to recompute it. Outside recursion the engine's timestamps are
//! the commit epochs, totally ordered and processed one at a time, so a group needs no
//! history: [`grouped_in_order`] keeps, per key, the multiset of its values (a sorted
//! `Vec`, so a group's values come out sorted, as `reduce` gives them) and the group it last
//! emitted, and at each epoch emits the change of every group the epoch touched. Sorting
//! happens within groups (tens of values), not across the whole input: the universal
//! flows' `group_by` (3.2M values in 226k groups at the NVP workload's full scale) was a
//! large part of a cold start as a `reduce`.
//!
//! Inside a recursive stratum (partially ordered timestamps) `group_by` stays a `reduce`;
//! [`Grouping`] picks per timestamp type.

use std::collections::hash_map::Entry;

use differential_dataflow::hashable::Hashable;
use differential_dataflow::lattice::Lattice;
use differential_dataflow::{AsCollection, VecCollection};
use rulec::value::{Row, Value};
use rustc_hash::FxHashMap;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::Capability;
use timely::order::Product;
use timely::progress::Timestamp;

use crate::body;

/// Input of a `group_by`: (the `by` values, one value).
pub type Keyed<'s, T> = VecCollection<'s, T, (Row, Value)>;

/// How a timestamp type computes `group_by`: for each key with values, one output
/// `(key, group)` where `group` is [`body::group_row`]'s group value.
pub trait Grouping: Timestamp + Lattice + Ord + Sized {
    /// The groups of `keyed`.
    fn group(keyed: Keyed<'_, Self>) -> Keyed<'_, Self>;
}

impl Grouping for u64 {
    fn group(keyed: Keyed<'_, u64>) -> Keyed<'_, u64> {
        grouped_in_order(keyed)
    }
}

impl Grouping for Product<u64, u64> {
    fn group(keyed: Keyed<'_, Self>) -> Keyed<'_, Self> {
        keyed.reduce(
            |k: &Row, vals: &[(&Value, isize)], out: &mut Vec<(Value, isize)>| {
                let values: Vec<Value> = vals.iter().map(|(v, _)| (*v).clone()).collect();
                if let Some(g) = body::group_row(k, values).pop() {
                    out.push((g, 1));
                }
            },
        )
    }
}

/// One key's group: its values with their counts and the group value last emitted.
#[derive(Default)]
struct Group {
    /// The values with their counts, sorted by value, no count zero. A sorted `Vec`, not a
    /// `BTreeMap`: a map's first leaf has room for eleven entries, ~370 bytes for the many
    /// groups of one value (the physical rules' flood copies, one per node and switch: at
    /// NVP's full scale ~0.5M groups, most of one value, in each physical controller).
    values: Vec<(Value, isize)>,
    emitted: Option<Value>,
    /// This epoch's changes, not yet folded in (empty between epochs).
    pending: Vec<(Value, isize)>,
}

impl Group {
    /// The group value for `key` now (`None` when no value has a positive count).
    fn value(&self, key: &Row) -> Option<Value> {
        let values: Vec<Value> = self
            .values
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(v, _)| v.clone())
            .collect();
        if values.is_empty() {
            return None;
        }
        body::group_row(key, values).pop()
    }

    /// Add an epoch's changes (any order, a value perhaps several times) to the counts.
    fn fold(&mut self, mut changes: Vec<(Value, isize)>) {
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        let old = std::mem::take(&mut self.values);
        let mut merged: Vec<(Value, isize)> = Vec::with_capacity(old.len() + changes.len());
        let mut old = old.into_iter().peekable();
        let mut changes = changes.into_iter().peekable();
        loop {
            let next = match (old.peek(), changes.peek()) {
                (Some(a), Some(b)) if b.0 < a.0 => changes.next(),
                (Some(_), _) => old.next(),
                (None, _) => changes.next(),
            };
            let Some((value, n)) = next else { break };
            match merged.last_mut() {
                Some(last) if last.0 == value => last.1 += n,
                _ => merged.push((value, n)),
            }
        }
        merged.retain(|(_, n)| *n != 0);
        merged.shrink_to_fit();
        self.values = merged;
    }
}

/// The groups of `keyed` for totally ordered timestamps, from a hash map of groups (see
/// the module documentation). Rows are exchanged by key, so a key's group lives on one
/// worker.
pub fn grouped_in_order(keyed: Keyed<'_, u64>) -> Keyed<'_, u64> {
    type Update = ((Row, Value), u64, isize);
    let exchange = Exchange::new(|((k, _), _, _): &Update| k.hashed());
    keyed
        .inner
        .unary_frontier(exchange, "GroupBy", |_capability, _info| {
            let mut groups: FxHashMap<Row, Group> = FxHashMap::default();
            let mut pending: Vec<(Capability<u64>, Vec<Update>)> = Vec::new();
            move |(input, frontier), output| {
                input.for_each_stamp(|cap, data| {
                    let Some(cap) = cap.retain_least(output.output_index()) else {
                        return;
                    };
                    let i =
                        if let Some(i) = pending.iter().position(|(c, _)| c.time() == cap.time()) {
                            i
                        } else {
                            pending.push((cap, Vec::new()));
                            pending.len() - 1
                        };
                    for batch in data {
                        pending[i].1.append(batch);
                    }
                });
                // The epochs the frontier has passed, in time order: groups evolve through them.
                pending.sort_by_key(|(c, _)| *c.time());
                while pending
                    .first()
                    .is_some_and(|(c, _)| !frontier.less_equal(c.time()))
                {
                    let (cap, updates) = pending.remove(0);
                    let time = *cap.time();
                    let mut touched: Vec<Row> = Vec::new();
                    for ((key, value), _, diff) in updates {
                        // One lookup per update; a key is copied once per group and epoch.
                        let group = match groups.entry(key) {
                            Entry::Occupied(e) => {
                                if e.get().pending.is_empty() {
                                    touched.push(e.key().clone());
                                }
                                e.into_mut()
                            }
                            Entry::Vacant(e) => {
                                touched.push(e.key().clone());
                                e.insert(Group::default())
                            }
                        };
                        group.pending.push((value, diff));
                    }
                    let mut session = output.session(&cap);
                    for key in touched {
                        let Some(group) = groups.get_mut(&key) else {
                            continue;
                        };
                        let changes = std::mem::take(&mut group.pending);
                        group.fold(changes);
                        let now = group.value(&key);
                        if now != group.emitted {
                            if let Some(old) = group.emitted.take() {
                                session.give(((key.clone(), old), time, -1));
                            }
                            if let Some(new) = &now {
                                session.give(((key.clone(), new.clone()), time, 1));
                            }
                            group.emitted = now;
                        }
                        if group.values.is_empty() {
                            groups.remove(&key);
                        }
                    }
                }
            }
        })
        .as_collection()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use rulec::value::Value;

    use super::Group;

    proptest! {
        /// Folding epochs of changes (values repeated, counts cancelling) keeps exactly the
        /// values whose summed count is not zero, sorted: what a map of counts holds.
        #[test]
        fn fold_equals_a_map_of_counts(
            epochs in prop::collection::vec(
                prop::collection::vec((0u8..12, -2isize..3), 0..20), 1..8),
        ) {
            let mut group = Group::default();
            let mut model: BTreeMap<Value, isize> = BTreeMap::new();
            for epoch in epochs {
                let changes: Vec<(Value, isize)> =
                    epoch.iter().map(|(v, n)| (Value::bit(u128::from(*v)), *n)).collect();
                for (v, n) in &changes {
                    *model.entry(v.clone()).or_insert(0) += n;
                }
                model.retain(|_, n| *n != 0);
                group.fold(changes);
                let expected: Vec<(Value, isize)> = model.clone().into_iter().collect();
                prop_assert_eq!(&group.values, &expected);
            }
        }
    }
}
