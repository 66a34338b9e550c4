//! `import` resolution: relative to the importing file, then to the given files'
//! directories; each file compiled once.

use std::path::PathBuf;

fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rulec-imports-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    dir
}

#[test]
fn imports_resolve_and_compile_once() {
    let dir = tree(
        "ok",
        &[
            ("main.dl", "import net::addr\nimport net::ports\noutput relation Out(a: addr_t)\nOut(a) :- Port(_, a).\n"),
            // Imports inside net/ resolve relative to net/ first (sibling `addr`), and the
            // diamond (main → addr, main → ports → addr) compiles addr once.
            ("net/addr.dl", "typedef addr_t = bit<32>\nfunction localhost(): addr_t = 0x7f000001\n"),
            ("net/ports.dl", "import addr\ninput relation Port(id: bit<16>, a: addr_t)\n"),
        ],
    );
    let p = rulec::compile_files(&[dir.join("main.dl")]).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.relation_id("Port").is_some());
    assert_eq!(
        p.functions.iter().filter(|f| f.name == "localhost").count(),
        1
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn import_falls_back_to_the_given_files_directories() {
    let dir = tree(
        "fallback",
        &[
            (
                "a/main.dl",
                "import lib::util\noutput relation O(x: bit<8>)\nO(one()).\n",
            ),
            ("b/other.dl", "input relation I(x: bit<8>)\n"),
            ("b/lib/util.dl", "function one(): bit<8> = 1\n"),
        ],
    );
    let p = rulec::compile_files(&[dir.join("a/main.dl"), dir.join("b/other.dl")])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(p.functions.iter().any(|f| f.name == "one"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn errors_name_the_imported_file() {
    let dir = tree(
        "err",
        &[
            ("main.dl", "import bad\n"),
            ("bad.dl", "input relation R(a: u8)\n"),
        ],
    );
    let e = rulec::compile_files(&[dir.join("main.dl")]).unwrap_err();
    assert!(e.file.ends_with("bad.dl"), "{e}");
    assert_eq!(
        (e.line, e.col, e.message.as_str()),
        (1, 21, "unknown type `u8`")
    );
    let e = rulec::compile_files(&[dir.join("missing.dl")]).unwrap_err();
    assert!(e.message.starts_with("cannot read file"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
