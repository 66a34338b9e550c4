//! Incremental == from scratch on a program written in the rule language and compiled by
//! `rulec`: the benchmark's synthetic NVP program (join, FlatMap, antijoin, recursion,
//! `group_by`, string interpolation, a primary key).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use engine::{accumulate, naive, Engine, Options, Update};
use proptest::prelude::*;
use rulec::ir::{Program, RelId, Role};
use rulec::value::{Row, Value};

fn nvp() -> Program {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/loom_ddlog/benchdata/nvp_synthetic.dl");
    rulec::compile_files(&[path]).unwrap_or_else(|e| panic!("{e}"))
}

const TEXTS: [&str; 4] = ["tcp;udp", "icmp", "", "a;b;a"];

#[derive(Clone, Debug)]
enum Op {
    Switch(u8, u8, bool),
    Port(u8, u8, u8, bool),
    Acl(u8, u8, u8, bool),
    Link(u8, u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..5u8, 0..2u8, any::<bool>()).prop_map(|(a, b, c)| Op::Switch(a, b, c)),
        (0..8u8, 0..5u8, 0..3u8, any::<bool>()).prop_map(|(a, b, c, d)| Op::Port(a, b, c, d)),
        (0..5u8, 0..2u8, 0..4u8, any::<bool>()).prop_map(|(a, b, c, d)| Op::Acl(a, b, c, d)),
        (0..5u8, 0..5u8, any::<bool>()).prop_map(|(a, b, c)| Op::Link(a, b, c)),
    ]
}

fn bit(x: u8) -> Value {
    Value::bit(u128::from(x))
}

struct Rels {
    switch: RelId,
    port: RelId,
    acl: RelId,
    link: RelId,
}

fn to_update(r: &Rels, op: &Op, model: &mut BTreeMap<RelId, BTreeSet<Row>>) -> Update {
    let (rel, row, ins) = match *op {
        Op::Switch(sw, key, ins) => (r.switch, vec![bit(sw), bit(key)], ins),
        Op::Acl(sw, prio, t, ins) => (
            r.acl,
            vec![bit(sw), bit(prio), Value::str(TEXTS[t as usize])],
            ins,
        ),
        Op::Link(a, b, ins) => (r.link, vec![bit(a), bit(b)], ins),
        Op::Port(p, sw, mac, ins) => {
            let row = vec![bit(p), bit(sw), bit(mac)];
            let ports = model.entry(r.port).or_default();
            if ins {
                ports.retain(|old| old[0] != bit(p));
                ports.insert(row.clone());
                return Update::InsertOrUpdate(r.port, row);
            }
            ports.remove(&row);
            return Update::Delete(r.port, row);
        }
    };
    let set = model.entry(rel).or_default();
    if ins {
        set.insert(row.clone());
        Update::Insert(rel, row)
    } else {
        set.remove(&row);
        Update::Delete(rel, row)
    }
}

fn check(prog: &Arc<Program>, txns: &[Vec<Op>]) -> Result<(), TestCaseError> {
    let id = |n: &str| prog.relation_id(n).expect("relation");
    let rels = Rels {
        switch: id("Switch"),
        port: id("Port"),
        acl: id("Acl"),
        link: id("Link"),
    };
    let eng = Engine::new(prog.clone(), &Options::default()).expect("engine");
    let mut model = BTreeMap::new();
    let mut acc = BTreeMap::new();
    for (i, ops) in txns.iter().enumerate() {
        let updates = ops
            .iter()
            .map(|o| to_update(&rels, o, &mut model))
            .collect();
        let delta = eng.apply(updates).expect("transaction");
        accumulate(&mut acc, &delta);
        acc.retain(|_, rows: &mut BTreeSet<Row>| !rows.is_empty());
        let expected = naive::evaluate(prog, &model);
        let outputs: BTreeMap<RelId, BTreeSet<Row>> = expected
            .iter()
            .filter(|(r, rows)| prog.relations[**r].role == Role::Output && !rows.is_empty())
            .map(|(r, rows)| (*r, rows.clone()))
            .collect();
        prop_assert_eq!(&acc, &outputs, "deltas after commit {}", i);
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
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn nvp_program_incremental_matches_naive(txns in prop::collection::vec(prop::collection::vec(op(), 0..10), 1..12)) {
        check(&Arc::new(nvp()), &txns)?;
    }
}
