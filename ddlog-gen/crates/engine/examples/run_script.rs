//! Run a command script against a rule program and print DDlog-format output:
//! `cargo run -p loom-engine --example run_script -- PROGRAM.dl SCRIPT.dat`.

use std::sync::Arc;

use engine::script::run_script;
use engine::{Engine, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dl), Some(dat)) = (args.get(1), args.get(2)) else {
        return Err("usage: run_script PROGRAM.dl SCRIPT.dat".into());
    };
    let prog = rulec::compile_files(&[dl])?;
    let eng = Engine::new(Arc::new(prog), &Options::default())?;
    let text = std::fs::read_to_string(dat)?;
    let mut out = std::io::stdout().lock();
    let outcome = run_script(&eng, dat, &text, &mut out)?;
    if outcome.errors > 0 {
        eprintln!("{} runtime error(s)", outcome.errors);
    }
    Ok(())
}
