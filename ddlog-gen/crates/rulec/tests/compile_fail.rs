//! Golden tests for compile errors: every `ddlog-gen/tests/programs/compile/NAME.fail.dl`
//! must fail, and its errors must equal `NAME.err.expected`.
//!
//! A `.fail.dl` file holds one or more snippets separated by lines `//---`; each snippet
//! is compiled on its own (other snippets' lines blanked, so positions are those of the
//! file) and contributes one `file:line:col: error: message` line. File names are
//! relative to the repository root. Run with `UPDATE_GOLDEN=1` to rewrite the expected
//! files, then review the diff.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The error lines produced by the snippets of one file.
fn errors_of(rel: &str, text: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut starts = vec![0];
    for (i, l) in lines.iter().enumerate() {
        if l.trim_end() == "//---" {
            starts.push(i + 1);
        }
    }
    starts.push(lines.len() + 1);
    let mut out = String::new();
    for w in starts.windows(2) {
        let (from, to) = (w[0], w[1].saturating_sub(1).min(lines.len()));
        let snippet: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if (from..to).contains(&i) {
                    (*l).to_string()
                } else {
                    "\n".to_string()
                }
            })
            .collect();
        match rulec::compile_source(rel, &snippet) {
            Ok(_) => writeln!(
                out,
                "{rel}: snippet at line {} compiled without error",
                from + 1
            ),
            Err(e) => writeln!(out, "{e}"),
        }
        .expect("write to String");
    }
    out
}

#[test]
fn compile_failures_match_golden() {
    let dir = root().join("ddlog-gen/tests/programs/compile");
    // Imports in snippets resolve relative to the current directory: the repo root.
    std::env::set_current_dir(root()).expect("cd to repo root");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("ddlog-gen/tests/programs/compile")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".fail.dl"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 15,
        "expected at least 15 compile-failure files"
    );
    let mut failures = Vec::new();
    for path in names {
        let file = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let rel = format!("ddlog-gen/tests/programs/compile/{file}");
        let text = std::fs::read_to_string(&path).expect("read");
        let got = errors_of(&rel, &text);
        let expected_path: PathBuf = dir.join(file.replace(".fail.dl", ".err.expected"));
        if update {
            std::fs::write(&expected_path, &got).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != want {
            failures.push(format!(
                "{}:\n--- expected\n{want}--- got\n{got}",
                Path::new(&rel).display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatches (UPDATE_GOLDEN=1 to regenerate):\n{}",
        failures.join("\n")
    );
}
