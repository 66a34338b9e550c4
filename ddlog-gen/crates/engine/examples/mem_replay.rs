//! Replay a recorded script against a rule program with production options (internal
//! relations not kept), then report the process's RSS: for heap profilers.
//! `cargo run --release -p loom-engine --example mem_replay -- PROGRAM.dl SCRIPT.dat [workers]`
#![allow(clippy::print_stdout, reason = "a tool prints its figures")]

use std::sync::Arc;

use engine::script::run_script;
use engine::{Engine, Options};

fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dl), Some(dat)) = (args.get(1), args.get(2)) else {
        return Err(
            "usage: mem_replay PROGRAM.dl SCRIPT.dat [workers [COUNTED_RELATION...]]".into(),
        );
    };
    let workers = args.get(3).map_or(Ok(2), |w| w.parse())?;
    let prog = rulec::compile_files(&[dl])?;
    // (the last arguments: output relations to count, as the physical controller does)
    let opts = Options {
        workers,
        internal: false,
        counted: args.get(4..).map(<[String]>::to_vec).unwrap_or_default(),
    };
    let eng = Engine::new(Arc::new(prog), &opts)?;
    let text = std::fs::read_to_string(dat)?;
    let began = std::time::Instant::now();
    let outcome = run_script(&eng, dat, &text, &mut std::io::sink())?;
    drop(text);
    println!(
        "replayed in {:.1}s, errors {}; {}",
        began.elapsed().as_secs_f64(),
        outcome.errors,
        rss()
    );
    Ok(())
}
