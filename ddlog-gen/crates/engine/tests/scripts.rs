//! Golden script tests: every `ddlog-gen/tests/programs/NAME.dat` runs against `NAME.dl`,
//! and the output must equal `NAME.dump.expected`. Set `UPDATE_GOLDEN=1` to rewrite the
//! expected files (then review the diff).

use std::path::PathBuf;
use std::sync::Arc;

use engine::script::run_script;
use engine::{Engine, Options};

fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs")
}

/// Run one script and return its output, with runtime errors already printed in it.
fn run(dl: &PathBuf, dat: &PathBuf) -> String {
    let prog = rulec::compile_files(&[dl]).unwrap_or_else(|e| panic!("{e}"));
    let eng = Engine::new(Arc::new(prog), &Options::default()).expect("engine");
    let text = std::fs::read_to_string(dat).expect("script");
    let mut out = Vec::new();
    run_script(&eng, &dat.display().to_string(), &text, &mut out).unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8(out).expect("utf-8 output")
}

#[test]
fn golden_scripts() {
    let dir = tests_dir();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("ddlog-gen/tests/programs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "dat"))
        .collect();
    names.sort();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for dat in &names {
        let dl = dat.with_extension("dl");
        let expected_path = dat.with_extension("dump.expected");
        let got = run(&dl, dat);
        if update {
            std::fs::write(&expected_path, &got).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != expected {
            failures.push(format!(
                "{}:\n--- expected\n{expected}\n--- got\n{got}",
                dat.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
