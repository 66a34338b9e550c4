//! The example programs under `rules/examples/` and the benchmark program compile.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

#[test]
fn examples_compile() {
    let dir = root().join("rules/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("rules/examples") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "dl") {
            if let Err(e) = rulec::compile_files(&[&path]) {
                panic!("{e}");
            }
            n += 1;
        }
    }
    assert!(n >= 2);
}

#[test]
fn benchmark_program_compiles() {
    let path = root().join("ddlog-gen/python/loom_ddlog/benchdata/nvp_synthetic.dl");
    let p = rulec::compile_files(&[&path]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.relations.len(), 7);
}
