//! Every rule program in the repository compiles: `rules/**/*.dl` (except the
//! compile-failure snippets under `rules/tests/compile/`) and the benchmark program.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn dl_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if !path.ends_with("tests/compile") {
                dl_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "dl") {
            out.push(path);
        }
    }
}

#[test]
fn all_rule_files_compile() {
    let mut files = Vec::new();
    dl_files(&root().join("rules"), &mut files);
    let errors: Vec<String> = files
        .iter()
        .filter_map(|f| rulec::compile_files(&[f]).err().map(|e| e.to_string()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
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
