#[test]
fn scratch() {
    let path = std::env::var("DL").unwrap();
    match rulec::compile_files(&[&path]) {
        Ok(p) => {
            for r in &p.rules { eprintln!("{} {:?}\n   head {:?}\n   body {:#?}", r.source, p.relations[r.head].name, r.head_exprs, r.body); }
            for s in &p.strata { eprintln!("{:?}", s); }
            for f in &p.functions { eprintln!("fn {} {:?}", f.name, f.body); }
        }
        Err(e) => eprintln!("{e}"),
    }
}
