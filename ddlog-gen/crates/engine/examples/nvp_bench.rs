//! Engine-only benchmark on the synthetic NVP-sized program of
//! `python/loom_ddlog/benchdata/nvp_synthetic.dl`, with its IR built by hand (so it runs
//! without the front end): cold load, single-port insert/delete latency, churn RSS, and a
//! naive from-scratch recompute for comparison.
//!
//! `cargo run --release -p loom-engine --example nvp_bench -- [scale] [txns] [workers]`
#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]
#![allow(clippy::cast_precision_loss, reason = "figures, not exact arithmetic")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use engine::{naive, Engine, Options, Update};
use rulec::ir::{
    BinOp, BodyItem, Builtin, Callee, Expr, Pattern, PrimaryKey, Program, Relation, Role, Rule,
    Stratum,
};
use rulec::types::Type;
use rulec::value::{Row, Value};

const PORT: usize = 0;
const SWITCH: usize = 1;
const ACL: usize = 2;
const LINK: usize = 3;
const FLOW: usize = 4;
const HAS_PORT: usize = 5;
const REACH: usize = 6;

fn c(v: Value) -> Expr {
    Expr::Const(v)
}
fn s(x: &str) -> Expr {
    c(Value::str(x))
}
fn v(i: usize) -> Expr {
    Expr::Var(i)
}
fn call(b: Builtin, args: Vec<Expr>) -> Expr {
    Expr::Call {
        func: Callee::Builtin(b),
        args,
    }
}
fn cat(parts: Vec<Expr>) -> Expr {
    let mut it = parts.into_iter();
    let first = it.next().expect("non-empty");
    it.fold(first, |acc, e| Expr::Binary {
        op: BinOp::Concat,
        ty: Type::String,
        lhs: Box::new(acc),
        rhs: Box::new(e),
    })
}
fn show(e: Expr, ty: Type) -> Expr {
    call(Builtin::ToString(ty), vec![e])
}
fn rel(name: &str, role: Role, cols: &[(&str, Type)]) -> Relation {
    Relation {
        name: name.into(),
        role,
        columns: cols
            .iter()
            .map(|(n, t)| ((*n).to_string(), t.clone()))
            .collect(),
        primary_key: None,
        source: String::new(),
    }
}
fn atom(rel: usize, args: Vec<Pattern>) -> BodyItem {
    BodyItem::Atom { rel, args }
}
fn rule(head: usize, head_exprs: Vec<Expr>, body: Vec<BodyItem>) -> Rule {
    Rule {
        head,
        head_exprs,
        body,
        source: String::new(),
    }
}
fn flow(sw: Expr, table: u128, prio: Expr, m: Expr, a: Expr) -> Vec<Expr> {
    vec![sw, c(Value::Bit(table)), prio, m, a]
}

fn program() -> Program {
    let (b32, b16, b8, b48) = (Type::Bit(32), Type::Bit(16), Type::Bit(8), Type::Bit(48));
    let (bind, wild) = (Pattern::Bind, Pattern::Wild);
    let eqv = |i: usize| Pattern::Eq(Box::new(v(i)));
    let mut port = rel(
        "Port",
        Role::Input,
        &[
            ("port_id", b32.clone()),
            ("switch_id", b32.clone()),
            ("mac", b48.clone()),
        ],
    );
    port.primary_key = Some(PrimaryKey {
        expr: v(0),
        ty: b32.clone(),
    });
    let relations = vec![
        port,
        rel(
            "Switch",
            Role::Input,
            &[("switch_id", b32.clone()), ("tunnel_key", b32.clone())],
        ),
        rel(
            "Acl",
            Role::Input,
            &[
                ("switch_id", b32.clone()),
                ("priority", b16.clone()),
                ("matches", Type::String),
            ],
        ),
        rel(
            "Link",
            Role::Input,
            &[("a", b32.clone()), ("b", b32.clone())],
        ),
        rel(
            "Flow",
            Role::Output,
            &[
                ("switch_id", b32.clone()),
                ("table", b8),
                ("priority", b16.clone()),
                ("matches", Type::String),
                ("actions", Type::String),
            ],
        ),
        rel(
            "SwitchHasPort",
            Role::Internal,
            &[("switch_id", b32.clone())],
        ),
        rel(
            "Reach",
            Role::Internal,
            &[("a", b32.clone()), ("b", b32.clone())],
        ),
    ];
    let rules = vec![
        rule(
            HAS_PORT,
            vec![v(0)],
            vec![atom(PORT, vec![wild.clone(), bind.clone(), wild.clone()])],
        ),
        rule(
            REACH,
            vec![v(0), v(1)],
            vec![atom(LINK, vec![bind.clone(), bind.clone()])],
        ),
        rule(
            REACH,
            vec![v(0), v(2)],
            vec![
                atom(REACH, vec![bind.clone(), bind.clone()]),
                atom(LINK, vec![eqv(1), bind.clone()]),
            ],
        ),
        rule(
            FLOW,
            flow(
                v(1),
                0,
                c(Value::Bit(100)),
                cat(vec![
                    s("in_port="),
                    show(v(0), b32.clone()),
                    s(",dl_src="),
                    call(Builtin::MacFormat, vec![v(2)]),
                ]),
                cat(vec![
                    s("set_field:"),
                    show(v(3), b32.clone()),
                    s("->tun_id,resubmit(,1)"),
                ]),
            ),
            vec![
                atom(PORT, vec![bind.clone(), bind.clone(), bind.clone()]),
                atom(SWITCH, vec![eqv(1), bind.clone()]),
            ],
        ),
        rule(
            FLOW,
            flow(v(0), 1, v(1), v(3), s("resubmit(,2)")),
            vec![
                atom(ACL, vec![bind.clone(), bind.clone(), bind.clone()]),
                atom(SWITCH, vec![eqv(0), wild.clone()]),
                BodyItem::FlatMap {
                    expr: call(Builtin::StrSplit, vec![v(2), s(";")]),
                    pattern: bind.clone(),
                },
            ],
        ),
        rule(
            FLOW,
            flow(v(0), 0, c(Value::Bit(1)), s(""), s("drop")),
            vec![
                atom(SWITCH, vec![bind.clone(), wild.clone()]),
                BodyItem::Not {
                    rel: HAS_PORT,
                    args: vec![eqv(0)],
                },
            ],
        ),
        rule(
            FLOW,
            flow(
                v(0),
                3,
                c(Value::Bit(10)),
                cat(vec![s("reach="), show(v(1), b32.clone())]),
                s("output"),
            ),
            vec![
                atom(REACH, vec![bind.clone(), bind.clone()]),
                BodyItem::Filter(Expr::Binary {
                    op: BinOp::Neq,
                    ty: b32.clone(),
                    lhs: Box::new(v(0)),
                    rhs: Box::new(v(1)),
                }),
            ],
        ),
        rule(
            FLOW,
            flow(
                v(0),
                4,
                c(Value::Bit(0)),
                s("n_ports"),
                show(v(2), Type::USIZE),
            ),
            vec![
                atom(PORT, vec![bind.clone(), bind, wild]),
                BodyItem::GroupBy {
                    by: vec![1],
                    value: v(0),
                },
                BodyItem::Let {
                    expr: call(Builtin::GroupCount, vec![v(1)]),
                    pattern: Pattern::Bind,
                },
            ],
        ),
    ];
    let strata = vec![
        Stratum {
            relations: vec![HAS_PORT],
            rules: vec![0],
            recursive: false,
        },
        Stratum {
            relations: vec![REACH],
            rules: vec![1, 2],
            recursive: true,
        },
        Stratum {
            relations: vec![FLOW],
            rules: vec![3, 4, 5, 6, 7],
            recursive: false,
        },
    ];
    let mut strata = strata;
    if let Ok(keep) = std::env::var("BENCH_FLOW_RULES") {
        let keep: Vec<usize> = keep.split(',').filter_map(|x| x.parse().ok()).collect();
        strata[2].rules.retain(|r| keep.contains(r));
    }
    Program {
        types: vec![],
        relations,
        functions: vec![],
        rules,
        strata,
    }
}

fn b(x: u64) -> Value {
    Value::Bit(u128::from(x))
}

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn inputs(scale: f64) -> (Vec<Update>, u64) {
    let n_switches = ((7000.0 * scale) as u64).max(10) / 10 * 10;
    let n_with_ports = n_switches * 9 / 10;
    let n_ports = (63000.0 * scale) as u64;
    let mut rng = Lcg(42);
    let mut ups = Vec::new();
    for sw in 0..n_switches {
        ups.push(Update::Insert(SWITCH, vec![b(sw), b(0x10000 + sw)]));
        for i in 0..10 {
            let m = if i % 3 == 0 {
                format!("udp,tp_dst={i};icmp")
            } else {
                format!("tcp,tp_dst={}", 80 + i)
            };
            ups.push(Update::Insert(
                ACL,
                vec![b(sw), b(1000 + i), Value::str(&m)],
            ));
        }
    }
    for p in 0..n_ports {
        ups.push(Update::Insert(
            PORT,
            vec![b(p), b(rng.below(n_with_ports)), b(0x0200_0000_0000 + p)],
        ));
    }
    for first in (0..n_switches).step_by(10) {
        for sw in first..first + 9 {
            ups.push(Update::Insert(LINK, vec![b(sw), b(sw + 1)]));
            ups.push(Update::Insert(LINK, vec![b(sw + 1), b(sw)]));
        }
    }
    (ups, n_with_ports)
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|x| x.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU seconds used by the whole process so far (all threads), from `/proc/self/stat`.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (field(11) + field(12)) / 100.0
}

fn pct(xs: &mut [f64], q: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() as f64 - 1.0) * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scale: f64 = args.get(1).and_then(|x| x.parse().ok()).unwrap_or(1.0);
    let txns: u64 = args.get(2).and_then(|x| x.parse().ok()).unwrap_or(1000);
    let workers: usize = args.get(3).and_then(|x| x.parse().ok()).unwrap_or(1);
    let prog = Arc::new(program());
    let (load, n_with_ports) = inputs(scale);
    let n_inputs = load.len();
    let rss0 = rss_mb();
    let t = Instant::now();
    let eng = Engine::new(prog.clone(), &Options { workers }).expect("engine");
    let built = t.elapsed();
    let t = Instant::now();
    let c0 = cpu_s();
    let delta = eng.apply(load.clone()).expect("load");
    let cold = t.elapsed();
    let cold_cpu = cpu_s() - c0;
    let flows = delta.get(&FLOW).map_or(0, Vec::len);
    println!("inputs {n_inputs}, flows {flows}, build {built:?}, cold load {cold:?} ({cold_cpu:.2} s CPU), rss {:.0} MB (+{:.0})", rss_mb(), rss_mb() - rss0);

    let mut rng = Lcg(7);
    let mut ins = Vec::new();
    let mut dels = Vec::new();
    let new_ports: Vec<Row> = (0..txns)
        .map(|i| {
            vec![
                b(1_000_000 + i),
                b(rng.below(n_with_ports)),
                b(0x0600_0000_0000 + i),
            ]
        })
        .collect();
    let c0 = cpu_s();
    for p in &new_ports {
        let t = Instant::now();
        let d = eng
            .apply(vec![Update::Insert(PORT, p.clone())])
            .expect("insert");
        ins.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(!d.is_empty());
    }
    for p in &new_ports {
        let t = Instant::now();
        eng.apply(vec![Update::Delete(PORT, p.clone())])
            .expect("delete");
        dels.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "port txns: {:.3} ms CPU per txn",
        (cpu_s() - c0) * 1000.0 / (2 * txns) as f64
    );
    println!(
        "port insert median {:.3} ms p99 {:.3} ms; delete median {:.3} ms p99 {:.3} ms",
        pct(&mut ins, 0.5),
        pct(&mut ins, 0.99),
        pct(&mut dels, 0.5),
        pct(&mut dels, 0.99)
    );
    // Recursion: a link joining two chains, then removing it.
    let mut rec = Vec::new();
    for i in 0..(txns / 10).max(10) {
        let a = (i * 20) % (n_with_ports / 10 * 10);
        let link = vec![b(a + 9), b(a + 10)];
        let t = Instant::now();
        eng.apply(vec![Update::Insert(LINK, link.clone())])
            .expect("link");
        eng.apply(vec![Update::Delete(LINK, link)]).expect("unlink");
        rec.push(t.elapsed().as_secs_f64() * 1000.0 / 2.0);
    }
    println!(
        "link join/split median {:.3} ms p99 {:.3} ms",
        pct(&mut rec, 0.5),
        pct(&mut rec, 0.99)
    );
    let rss_before = rss_mb();
    let t = Instant::now();
    for i in 0..txns * 10 {
        let p = vec![
            b(2_000_000 + i),
            b(rng.below(n_with_ports)),
            b(0x0A00_0000_0000 + i),
        ];
        eng.apply(vec![Update::Insert(PORT, p.clone())])
            .expect("churn");
        eng.apply(vec![Update::Delete(PORT, p)]).expect("churn");
    }
    println!(
        "churn {} txns in {:?}: rss {rss_before:.0} -> {:.0} MB",
        txns * 20,
        t.elapsed(),
        rss_mb()
    );
    if scale <= 0.2 {
        let model: BTreeMap<usize, BTreeSet<Row>> = (0..4)
            .map(|r| (r, eng.dump(r).expect("dump").into_iter().collect()))
            .collect();
        let t = Instant::now();
        let expected = naive::evaluate(&prog, &model);
        println!("naive recompute {:?}", t.elapsed());
        let got: BTreeSet<Row> = eng.dump(FLOW).expect("dump").into_iter().collect();
        assert_eq!(got, expected[&FLOW], "engine and naive agree");
        println!("engine == naive on {} flows", got.len());
    }
}
