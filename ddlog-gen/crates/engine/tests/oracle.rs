//! Incremental == from scratch: random transactions (with cancellations) on a program with
//! joins, negation, recursion, `group_by` and FlatMap. After every commit, the accumulated
//! deltas, `naive::evaluate` on the accumulated inputs, and `dump` must all agree.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::n;
use engine::{accumulate, naive, Engine, Options, Update};
use proptest::prelude::*;
use rulec::ir::{Program, RelId, Role};
use rulec::value::{Row, Value};

/// One random update, before it is turned into an [`Update`] against the model.
#[derive(Clone, Debug)]
enum Op {
    Switch(u8, u8, bool),
    /// Port `p` on switch `sw` with mac `m`; kind 0 = `insert_or_update`, 1 = delete row,
    /// 2 = `delete_key` (if present), 3 = insert (if no other row has the key).
    Port(u8, u8, u8, u8),
    Link(u8, u8, bool),
    Acl(u8, u8, u8, bool),
    Start(u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6u8, 0..3u8, any::<bool>()).prop_map(|(a, b, c)| Op::Switch(a, b, c)),
        (0..8u8, 0..6u8, 0..3u8, 0..4u8).prop_map(|(a, b, c, d)| Op::Port(a, b, c, d)),
        (0..6u8, 0..6u8, any::<bool>()).prop_map(|(a, b, c)| Op::Link(a, b, c)),
        (0..6u8, 0..2u8, 0..4u8, any::<bool>()).prop_map(|(a, b, c, d)| Op::Acl(a, b, c, d)),
        (0..6u8, any::<bool>()).prop_map(|(a, b)| Op::Start(a, b)),
    ]
}

fn bit(x: u8) -> Value {
    Value::bit(u128::from(x))
}

const TEXTS: [&str; 4] = ["a;b", "c", "a;c;d", ""];

/// Turn `op` into an update and apply it to the model of the inputs.
fn to_update(op: &Op, model: &mut BTreeMap<RelId, BTreeSet<Row>>) -> Update {
    let set_op = |model: &mut BTreeMap<RelId, BTreeSet<Row>>, rel: RelId, row: Row, ins: bool| {
        let set = model.entry(rel).or_default();
        if ins {
            set.insert(row.clone());
            Update::Insert(rel, row)
        } else {
            set.remove(&row);
            Update::Delete(rel, row)
        }
    };
    match *op {
        Op::Switch(sw, key, ins) => set_op(model, n::SWITCH, vec![bit(sw), bit(key)], ins),
        Op::Link(a, b, ins) => set_op(model, n::LINK, vec![bit(a), bit(b)], ins),
        Op::Acl(sw, prio, t, ins) => set_op(
            model,
            n::ACL,
            vec![bit(sw), bit(prio), Value::str(TEXTS[t as usize])],
            ins,
        ),
        Op::Start(x, ins) => set_op(model, n::START, vec![bit(x)], ins),
        Op::Port(p, sw, mac, kind) => {
            let row = vec![bit(p), bit(sw), bit(mac)];
            let ports = model.entry(n::PORT).or_default();
            let existing = ports.iter().find(|r| r[0] == bit(p)).cloned();
            match (kind, existing) {
                (1, _) => {
                    ports.remove(&row);
                    Update::Delete(n::PORT, row)
                }
                (2, Some(old)) => {
                    ports.remove(&old);
                    Update::DeleteKey(n::PORT, bit(p))
                }
                (3, None) => {
                    ports.insert(row.clone());
                    Update::Insert(n::PORT, row)
                }
                (_, old) => {
                    if let Some(old) = old {
                        ports.remove(&old);
                    }
                    ports.insert(row.clone());
                    Update::InsertOrUpdate(n::PORT, row)
                }
            }
        }
    }
}

fn outputs(prog: &Program, db: &BTreeMap<RelId, BTreeSet<Row>>) -> BTreeMap<RelId, BTreeSet<Row>> {
    db.iter()
        .filter(|(r, rows)| prog.relations[**r].role == Role::Output && !rows.is_empty())
        .map(|(r, rows)| (*r, rows.clone()))
        .collect()
}

fn check(workers: usize, txns: &[Vec<Op>]) -> Result<(), TestCaseError> {
    let prog = Arc::new(common::network());
    let eng = Engine::new(
        prog.clone(),
        &Options {
            workers,
            ..Options::default()
        },
    )
    .expect("engine starts");
    let mut model: BTreeMap<RelId, BTreeSet<Row>> = BTreeMap::new();
    let mut acc: BTreeMap<RelId, BTreeSet<Row>> = BTreeMap::new();
    for (i, ops) in txns.iter().enumerate() {
        let updates: Vec<Update> = ops.iter().map(|o| to_update(o, &mut model)).collect();
        let delta = eng.apply(updates).expect("transaction applies");
        for rows in delta.values() {
            prop_assert!(
                rows.windows(2).all(|w| w[0].0 < w[1].0),
                "delta rows sorted and unique"
            );
            prop_assert!(rows.iter().all(|(_, d)| *d == 1 || *d == -1));
        }
        accumulate(&mut acc, &delta);
        acc.retain(|_, rows| !rows.is_empty());
        let expected = naive::evaluate(&prog, &model);
        prop_assert_eq!(
            &acc,
            &outputs(&prog, &expected),
            "deltas after commit {}",
            i
        );
        for rel in 0..prog.relations.len() {
            let dumped: BTreeSet<Row> = eng.dump(rel).expect("dump").into_iter().collect();
            prop_assert_eq!(
                &dumped,
                &expected[&rel],
                "dump of {} after commit {}",
                prog.relations[rel].name,
                i
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn incremental_matches_naive(txns in prop::collection::vec(prop::collection::vec(op(), 0..8), 1..16)) {
        check(1, &txns)?;
    }

    #[test]
    fn incremental_matches_naive_two_workers(txns in prop::collection::vec(prop::collection::vec(op(), 0..8), 1..10)) {
        check(2, &txns)?;
    }
}

#[test]
fn facts_appear_at_first_commit() {
    let prog = Arc::new(common::network());
    let eng = Engine::new(prog, &Options::default()).unwrap();
    let delta = eng.apply(vec![]).unwrap();
    assert_eq!(
        delta.get(&n::FACT),
        Some(&vec![(vec![bit(7), Value::str("seven")], 1)])
    );
    assert_eq!(eng.apply(vec![]).unwrap(), BTreeMap::new());
    assert_eq!(eng.stats().commits, 2);
}

#[test]
fn runtime_errors_drop_rows_and_are_counted() {
    let prog = Arc::new(common::network());
    let eng = Engine::new(prog, &Options::default()).unwrap();
    let delta = eng
        .apply(vec![
            Update::Insert(n::SWITCH, vec![bit(3), bit(9)]),
            Update::Insert(n::SWITCH, vec![bit(4), bit(9)]),
        ])
        .unwrap();
    assert_eq!(
        delta.get(&n::OUT_DIV),
        Some(&vec![(vec![bit(4), bit(9)], 1)])
    );
    assert!(eng.stats().runtime_errors >= 1);
}
