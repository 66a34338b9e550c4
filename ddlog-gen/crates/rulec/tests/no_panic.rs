//! Robustness: the compiler and the script parser return errors, never panic, on
//! mutated versions of the example programs (deterministic pseudo-random edits).

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// A small deterministic generator (64-bit LCG); no dependency needed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

const SNIPPETS: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ".",
    ":-",
    "not ",
    "var ",
    "_",
    "\"",
    "${",
    "0",
    "-1",
    "x",
    "Some{",
    "None",
    "group_by(",
    "FlatMap(",
    "as bit<8>",
    ": string",
    "=",
    "==",
    "&",
    "8'hff",
    "[1:0]",
    "match (x) {",
    "->",
    "if (",
];

fn mutate(text: &str, rng: &mut Lcg) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..=rng.next(3) {
        let at = rng.next(chars.len());
        match rng.next(3) {
            0 => {
                let len = rng.next(8).min(chars.len() - at);
                chars.drain(at..at + len);
            }
            1 => {
                let s = SNIPPETS[rng.next(SNIPPETS.len())];
                for (i, c) in s.chars().enumerate() {
                    chars.insert(at + i, c);
                }
            }
            _ => {
                let from = rng.next(chars.len());
                let len = rng.next(12).min(chars.len() - from);
                let piece: Vec<char> = chars[from..from + len].to_vec();
                for (i, c) in piece.into_iter().enumerate() {
                    chars.insert(at.min(chars.len()) + i, c);
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_programs_never_panic() {
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(root().join("ddlog-gen/examples")).expect("examples") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "dl") {
            sources.push(std::fs::read_to_string(p).expect("read"));
        }
    }
    sources.push(rulec::PRELUDE.to_string());
    let mut rng = Lcg(7);
    for i in 0..1000 {
        let src = &sources[i % sources.len()];
        let text = mutate(src, &mut rng);
        let r = std::panic::catch_unwind(|| rulec::compile_source("m.dl", &text));
        assert!(r.is_ok(), "compiler panicked on:\n{text}");
    }
}

#[test]
fn mutated_scripts_never_panic() {
    let program = rulec::compile_source(
        "t.dl",
        "typedef A = B | C{x: bit<8>}\ninput relation R(a: bit<32>, b: string, c: Option<A>, d: Map<string, Set<signed<4>>>) primary key (r) r.a\n",
    )
    .expect("compile");
    let script = "start;\ninsert R(1, \"a\", Some{C{3}}, [(\"k\", [1, -2])]), delete R(2, \"b\", None, []);\n\
                  delete_key R 5;\nmodify R 1 <- R{.b = \"z\"};\ncommit dump_changes;\ndump R;\necho hi;\nclear R;\n";
    let mut rng = Lcg(11);
    for _ in 0..1000 {
        let text = mutate(script, &mut rng);
        let r = std::panic::catch_unwind(|| rulec::script::parse_script(&program, "s.dat", &text));
        assert!(r.is_ok(), "script parser panicked on:\n{text}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!(
        "function f(): bigint = {}1{}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    let e = rulec::compile_source("d.dl", &deep).unwrap_err();
    assert!(e.message.contains("nested too deeply"), "{e}");
    let neg = format!("function f(): bigint = {}1", "-".repeat(100_000));
    assert!(rulec::compile_source("d.dl", &neg).is_err());
    let ty = format!(
        "input relation R(a: {}bool{})",
        "Vec<".repeat(100_000),
        ">".repeat(100_000)
    );
    assert!(rulec::compile_source("d.dl", &ty).is_err());
}

#[test]
fn long_operator_chains_compile() {
    let chain = vec!["x"; 900].join(" + ");
    let src = format!("function f(x: bit<32>): bit<32> = {chain}");
    rulec::compile_source("c.dl", &src).unwrap_or_else(|e| panic!("{e}"));
    let too_long = vec!["x"; 5000].join(" + ");
    let src = format!("function f(x: bit<32>): bit<32> = {too_long}");
    assert!(rulec::compile_source("c.dl", &src)
        .unwrap_err()
        .message
        .contains("nested too deeply"));
}

#[test]
fn deeply_nested_script_values_are_errors() {
    let program =
        rulec::compile_source("t.dl", "input relation R(a: Vec<bit<8>>)").expect("compile");
    let text = format!("insert R({}1{});", "[".repeat(50_000), "]".repeat(50_000));
    assert!(rulec::script::parse_script(&program, "s.dat", &text).is_err());
}
