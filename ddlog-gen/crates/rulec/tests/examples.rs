//! Every rule program in the repository compiles: Loom's rule set (`rules/**/*.dl`), the
//! language's examples (`ddlog-gen/examples/`) and test programs (`ddlog-gen/tests/programs/`,
//! except the compile-failure snippets under `compile/`), and the benchmark program.

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
            if !path.ends_with("tests/programs/compile") {
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
    for dir in ["rules", "ddlog-gen/examples", "ddlog-gen/tests/programs"] {
        let before = files.len();
        dl_files(&root().join(dir), &mut files);
        assert!(files.len() > before, "no .dl file under {dir}");
    }
    let errors: Vec<String> = files
        .iter()
        .filter_map(|f| rulec::compile_files(&[f]).err().map(|e| e.to_string()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn examples_compile() {
    let dir = root().join("ddlog-gen/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("ddlog-gen/examples") {
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
