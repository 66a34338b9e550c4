//! Engine-only benchmark on the synthetic NVP-sized program of
//! `python/loom_ddlog/benchdata/nvp_synthetic.dl`: cold load, single-port insert/delete
//! latency, link (recursion) changes, churn RSS, and a naive from-scratch recompute for
//! comparison at small scales.
//!
//! `cargo run --release -p loom-engine --example nvp_bench -- [scale] [txns] [workers]`
#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]
#![allow(clippy::cast_precision_loss, reason = "figures, not exact arithmetic")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use engine::{naive, Engine, Options, Update};
use rulec::ir::Program;
use rulec::value::{Row, Value};

const PORT: usize = 1;
const SWITCH: usize = 0;
const ACL: usize = 2;
const LINK: usize = 3;
const FLOW: usize = 4;

/// The benchmark program, compiled from source, with the relation ids used here checked.
fn program() -> Program {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/loom_ddlog/benchdata/nvp_synthetic.dl");
    let prog = rulec::compile_files(&[path]).unwrap_or_else(|e| panic!("{e}"));
    for (id, name) in [
        (PORT, "Port"),
        (SWITCH, "Switch"),
        (ACL, "Acl"),
        (LINK, "Link"),
        (FLOW, "Flow"),
    ] {
        assert_eq!(prog.relation_id(name), Some(id), "relation {name}");
    }
    prog
}

fn b(x: u64) -> Value {
    Value::bit(u128::from(x))
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
    let eng = Engine::new(
        prog.clone(),
        &Options {
            workers,
            ..Options::default()
        },
    )
    .expect("engine");
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
