//! Transaction semantics: set semantics, primary keys, atomic failure, errors by kind.

use std::sync::Arc;

use engine::{Engine, Error, Options, Update};
use rulec::value::{Row, Value};

const PROGRAM: &str = r"
input relation Kv(k: bit<8>, v: string) primary key (r) r.k
input relation Tag(t: string)
output relation Out(k: bit<8>, v: string)
Out(k, v) :- Kv(k, v).
output relation Tags(t: string)
Tags(t) :- Tag(t).
";

struct Fixture {
    eng: Engine,
    kv: usize,
    tag: usize,
    out: usize,
}

fn fixture() -> Fixture {
    let prog = Arc::new(rulec::compile_source("txn.dl", PROGRAM).unwrap_or_else(|e| panic!("{e}")));
    let id = |n: &str| prog.relation_id(n).unwrap();
    let (kv, tag, out) = (id("Kv"), id("Tag"), id("Out"));
    Fixture {
        eng: Engine::new(prog, &Options::default()).unwrap(),
        kv,
        tag,
        out,
    }
}

fn kv(k: u8, v: &str) -> Row {
    vec![Value::bit(u128::from(k)), Value::str(v)]
}

fn key(k: u8) -> Value {
    Value::bit(u128::from(k))
}

#[test]
fn engine_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Engine>();
}

#[test]
fn set_semantics_and_cancellation() {
    let f = fixture();
    let t = |s: &str| vec![Value::str(s)];
    let d = f
        .eng
        .apply(vec![
            Update::Insert(f.tag, t("a")),
            Update::Insert(f.tag, t("a")),
            Update::Insert(f.tag, t("b")),
            Update::Delete(f.tag, t("b")),
            Update::Delete(f.tag, t("zz")),
        ])
        .unwrap();
    assert_eq!(d.values().flatten().count(), 1);
    assert_eq!(f.eng.dump(f.tag).unwrap(), vec![t("a")]);
    // Delete then re-insert of a present row: no change at all.
    let d = f
        .eng
        .apply(vec![
            Update::Delete(f.tag, t("a")),
            Update::Insert(f.tag, t("a")),
        ])
        .unwrap();
    assert!(d.is_empty());
    // A transaction of no-ops still commits.
    let before = f.eng.stats().commits;
    assert!(f
        .eng
        .apply(vec![Update::Insert(f.tag, t("a"))])
        .unwrap()
        .is_empty());
    assert_eq!(f.eng.stats().commits, before + 1);
}

#[test]
fn failed_transaction_changes_nothing() {
    let f = fixture();
    f.eng
        .apply(vec![Update::Insert(f.kv, kv(1, "one"))])
        .unwrap();
    let err = f
        .eng
        .apply(vec![
            Update::Insert(f.kv, kv(2, "two")),
            Update::Insert(f.kv, kv(1, "uno")),
        ])
        .unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "duplicate key 1 in relation Kv: Kv{.k = 1, .v = \"one\"} exists"
    );
    assert_eq!(f.eng.dump(f.kv).unwrap(), vec![kv(1, "one")]);
    assert_eq!(f.eng.dump(f.out).unwrap(), vec![kv(1, "one")]);
    // The key freed earlier in the same transaction can be reused.
    let d = f
        .eng
        .apply(vec![
            Update::DeleteKey(f.kv, key(1)),
            Update::Insert(f.kv, kv(1, "uno")),
        ])
        .unwrap();
    assert_eq!(d[&f.out], vec![(kv(1, "one"), -1), (kv(1, "uno"), 1)]);
}

#[test]
fn key_updates() {
    let f = fixture();
    f.eng
        .apply(vec![
            Update::InsertOrUpdate(f.kv, kv(1, "a")),
            Update::InsertOrUpdate(f.kv, kv(1, "b")),
        ])
        .unwrap();
    assert_eq!(f.eng.dump(f.kv).unwrap(), vec![kv(1, "b")]);
    f.eng
        .apply(vec![Update::Modify(
            f.kv,
            key(1),
            vec![(1, Value::str("c"))],
        )])
        .unwrap();
    assert_eq!(f.eng.dump(f.out).unwrap(), vec![kv(1, "c")]);
    let err = f
        .eng
        .apply(vec![Update::Modify(f.kv, key(9), vec![])])
        .unwrap_err();
    assert!(matches!(err, Error::UnknownKey { .. }), "{err}");
    let err = f
        .eng
        .apply(vec![Update::DeleteKey(f.tag, Value::str("x"))])
        .unwrap_err();
    assert!(matches!(err, Error::NoPrimaryKey { .. }), "{err}");
    f.eng
        .apply(vec![
            Update::Clear(f.kv),
            Update::Insert(f.kv, kv(5, "e")),
            Update::Insert(f.tag, vec![Value::str("t")]),
        ])
        .unwrap();
    assert_eq!(f.eng.dump(f.kv).unwrap(), vec![kv(5, "e")]);
    f.eng.apply(vec![Update::Clear(f.kv)]).unwrap();
    assert!(f.eng.dump(f.out).unwrap().is_empty());
}

#[test]
fn bad_updates_are_errors() {
    let f = fixture();
    let err = f
        .eng
        .apply(vec![Update::Insert(f.out, kv(1, "x"))])
        .unwrap_err();
    assert!(matches!(err, Error::NotInput { .. }), "{err}");
    let err = f
        .eng
        .apply(vec![Update::Insert(f.kv, vec![key(1)])])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Arity {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{err}"
    );
    let err = f.eng.apply(vec![Update::Insert(99, vec![])]).unwrap_err();
    assert!(matches!(err, Error::UnknownRelation(_)), "{err}");
    assert!(matches!(f.eng.dump(99), Err(Error::UnknownRelation(_))));
    assert_eq!(f.eng.stats().commits, 0);
}

#[test]
fn without_internal_relations_outputs_are_the_same_and_dumping_an_internal_one_fails() {
    const SRC: &str = r"
input relation Kv(k: bit<8>, v: string)
relation Mid(k: bit<8>, v: string)
Mid(k, v) :- Kv(k, v).
output relation Out(v: string)
Out(v) :- Mid(_, v).
";
    let prog =
        Arc::new(rulec::compile_source("internal.dl", SRC).unwrap_or_else(|e| panic!("{e}")));
    let id = |n: &str| prog.relation_id(n).unwrap();
    let (kv_rel, mid, out) = (id("Kv"), id("Mid"), id("Out"));
    let lean = Options {
        internal: false,
        ..Options::default()
    };
    let engines = [
        Engine::new(prog.clone(), &Options::default()).unwrap(),
        Engine::new(prog.clone(), &lean).unwrap(),
    ];
    let deltas: Vec<_> = engines
        .iter()
        .map(|e| {
            e.apply(vec![
                Update::Insert(kv_rel, kv(1, "a")),
                Update::Insert(kv_rel, kv(2, "a")),
            ])
            .unwrap()
        })
        .collect();
    assert_eq!(deltas[0], deltas[1]);
    assert_eq!(engines[1].dump(out).unwrap(), vec![vec![Value::str("a")]]);
    assert_eq!(engines[0].dump(mid).unwrap().len(), 2);
    let err = engines[1].dump(mid).unwrap_err();
    assert!(
        matches!(err, Error::NotMaterialized(ref name) if name == "Mid"),
        "{err}"
    );
}

#[test]
fn a_counted_output_gives_its_derivation_counts_and_is_not_kept() {
    // `Out` is derived twice from `a` (two `Kv` rows), once from `b`; a counted engine
    // gives those counts as they change, a keeping one the set changes.
    const SRC: &str = r"
input relation Kv(k: bit<8>, v: string)
output relation Out(v: string)
Out(v) :- Kv(_, v).
output relation Keys(k: bit<8>)
Keys(k) :- Kv(k, _).
";
    let prog = Arc::new(rulec::compile_source("counted.dl", SRC).unwrap_or_else(|e| panic!("{e}")));
    let id = |n: &str| prog.relation_id(n).unwrap();
    let (kv_rel, out, keys) = (id("Kv"), id("Out"), id("Keys"));
    let counted = Options {
        counted: vec!["Out".to_string()],
        ..Options::default()
    };
    let engines = [
        Engine::new(prog.clone(), &Options::default()).unwrap(),
        Engine::new(prog.clone(), &counted).unwrap(),
    ];
    let apply = |e: &Engine, updates: Vec<Update>| e.apply(updates).unwrap();
    let first = |e: &Engine| {
        apply(
            e,
            vec![
                Update::Insert(kv_rel, kv(1, "a")),
                Update::Insert(kv_rel, kv(2, "a")),
                Update::Insert(kv_rel, kv(3, "b")),
            ],
        )
    };
    let (kept, count) = (first(&engines[0]), first(&engines[1]));
    let a = vec![Value::str("a")];
    let b = vec![Value::str("b")];
    assert_eq!(kept[&out], vec![(a.clone(), 1), (b.clone(), 1)]);
    assert_eq!(count[&out], vec![(a.clone(), 2), (b.clone(), 1)]);
    assert_eq!(
        kept[&keys], count[&keys],
        "other outputs are kept as before"
    );
    // One derivation of `a` goes: no set change, a count of -1.
    let less = vec![Update::Delete(kv_rel, kv(1, "a"))];
    assert!(!apply(&engines[0], less.clone()).contains_key(&out));
    assert_eq!(apply(&engines[1], less)[&out], vec![(a.clone(), -1)]);
    // A change that nets out within one commit is no change.
    let both = vec![
        Update::Insert(kv_rel, kv(4, "c")),
        Update::Delete(kv_rel, kv(4, "c")),
    ];
    assert!(!apply(&engines[1], both).contains_key(&out));
    assert_eq!(engines[0].dump(out).unwrap(), vec![a.clone(), b]);
    let err = engines[1].dump(out).unwrap_err();
    assert!(
        matches!(err, Error::Counted(ref name) if name == "Out"),
        "{err}"
    );
    assert_eq!(
        engines[1].dump(keys).unwrap(),
        engines[0].dump(keys).unwrap()
    );
    // Only an output relation can be counted, and only one that exists.
    for (name, want) in [("Kv", "not an output"), ("Nope", "unknown relation")] {
        let options = Options {
            counted: vec![name.to_string()],
            ..Options::default()
        };
        let err = Engine::new(prog.clone(), &options).err().expect("refused");
        assert!(err.to_string().contains(want), "{err}");
    }
}
