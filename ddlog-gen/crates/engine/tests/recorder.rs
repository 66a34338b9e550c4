//! The recorder writes applied transactions as a `.dat` script; replaying it into a fresh
//! engine gives the same state.

use std::io::Write;
use std::sync::{Arc, Mutex};

use engine::script::run_script;
use engine::{Engine, Options, Update};
use rulec::value::Value;

/// A `Write` sink shared with the test.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("sink").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const PROGRAM: &str = r"
typedef Kind = Access{vlan: bit<12>} | Trunk{vlans: Set<bit<12>>}
input relation Port(name: string, kind: Kind, peer: Option<string>, tags: Map<string, signed<32>>)
    primary key (p) p.name
input relation Note(text: string, n: bigint)
output relation Out(name: string, kind: Kind, n: usize)
Out(name, kind, tags.len()) :- Port(name, kind, _, tags).
output relation Notes(text: string)
Notes(t) :- Note(t, _).
";

#[test]
fn replaying_a_recording_reproduces_the_state() {
    let prog = Arc::new(rulec::compile_source("rec.dl", PROGRAM).unwrap_or_else(|e| panic!("{e}")));
    let eng = Engine::new(prog.clone(), &Options::default()).unwrap();
    let sink = Sink::default();
    eng.set_recorder(Some(Box::new(sink.clone())));
    let port = prog.relation_id("Port").unwrap();
    let note = prog.relation_id("Note").unwrap();
    let text = "start;\n\
        insert Port(\"p1\", Access{10}, None, [(\"a\", -1)]),\n\
        insert Port(\"p\\\"2\\n\", Trunk{[3, 1]}, Some{\"p1\"}, []),\n\
        insert Note(\"x\\\\y\", 123456789012345678901234567890);\n\
        commit;\n\
        start;\n\
        insert_or_update Port(\"p1\", Access{20}, None, []),\n\
        delete Note(\"x\\\\y\", 123456789012345678901234567890),\n\
        insert Note(\"-\", -5);\n\
        commit;\n\
        start; insert Port(\"p1\", Access{30}, None, []); commit;\n\
        start; commit;\n";
    let mut out = Vec::new();
    let outcome = run_script(&eng, "live.dat", text, &mut out).unwrap();
    assert_eq!(
        outcome.errors,
        1,
        "the duplicate key fails: {}",
        String::from_utf8_lossy(&out)
    );
    eng.apply(vec![Update::DeleteKey(port, Value::str("p\"2\n"))])
        .unwrap();
    eng.set_recorder(None);
    eng.apply(vec![Update::Clear(note)]).unwrap();

    let recording = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    assert!(recording.starts_with("start;\n"), "{recording}");
    assert_eq!(
        recording.matches("commit;").count(),
        4,
        "failed transactions are not recorded: {recording}"
    );

    let replay = Engine::new(prog.clone(), &Options::default()).unwrap();
    let mut out = Vec::new();
    let outcome = run_script(&replay, "replay.dat", &recording, &mut out).unwrap();
    assert_eq!(outcome.errors, 0, "{}", String::from_utf8_lossy(&out));
    // The live engine cleared Note after recording stopped; do the same.
    replay.apply(vec![Update::Clear(note)]).unwrap();
    for rel in 0..prog.relations.len() {
        assert_eq!(
            eng.dump(rel).unwrap(),
            replay.dump(rel).unwrap(),
            "relation {}",
            prog.relations[rel].name
        );
    }
    assert_eq!(replay.dump(port).unwrap().len(), 1);
}
