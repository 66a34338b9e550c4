//! Command-script parser tests.

use rulec::script::{parse_script, Command, Update};
use rulec::value::Value;

fn program() -> rulec::ir::Program {
    rulec::compile_source(
        "t.dl",
        "typedef Action = Drop | Output{port: bit<16>}\n\
         input relation R(a: bit<32>, b: string) primary key (x) x.a\n\
         input relation C(s: signed<8>, t: Set<bit<8>>, m: Map<string, bit<8>>, o: Option<Action>, v: Vec<(bool, bigint)>)\n\
         output relation O(a: bit<32>)\nO(a) :- R(a, _).",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn commands() {
    let p = program();
    let text = "# a comment\nstart;\ninsert R(1, \"a\"),\ninsert R{.b = \"x;y\", .a = 2}; // trailing\n\
                delete R(1, \"a\");\ndelete_key R 2;\nmodify R 3 <- R{.b = \"z\"};\nclear R;\n\
                commit dump_changes;\ncommit;\ndump O;\ndump;\necho hello, world;\nrollback;\nexit;";
    let cmds: Vec<Command> = parse_script(&p, "t.dat", text)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|c| c.0)
        .collect();
    let r = 0;
    assert_eq!(cmds[0], Command::Start);
    assert_eq!(
        cmds[1],
        Command::Updates(vec![
            Update::Insert(r, vec![Value::bit(1), Value::str("a")]),
            Update::Insert(r, vec![Value::bit(2), Value::str("x;y")]),
        ])
    );
    assert_eq!(
        cmds[2],
        Command::Updates(vec![Update::Delete(
            r,
            vec![Value::bit(1), Value::str("a")]
        )])
    );
    assert_eq!(
        cmds[3],
        Command::Updates(vec![Update::DeleteKey(r, Value::bit(2))])
    );
    assert_eq!(
        cmds[4],
        Command::Updates(vec![Update::Modify(
            r,
            Value::bit(3),
            vec![(1, Value::str("z"))]
        )])
    );
    assert_eq!(cmds[5], Command::Updates(vec![Update::Clear(r)]));
    assert_eq!(cmds[6], Command::Commit { dump_changes: true });
    assert_eq!(
        cmds[7],
        Command::Commit {
            dump_changes: false
        }
    );
    assert_eq!(cmds[8], Command::Dump(Some(2)));
    assert_eq!(cmds[9], Command::Dump(None));
    assert_eq!(cmds[10], Command::Echo("hello, world".into()));
    assert_eq!(cmds[11], Command::Rollback);
    assert_eq!(cmds[12], Command::Exit);
}

#[test]
fn values_follow_column_types() {
    let p = program();
    let text = "insert C(-5, [3, 1, 3], [(\"b\", 2), (\"a\", 1)], Some{Output{.port = 7}}, [(true, -12345678901234567890)]);";
    let cmds = parse_script(&p, "t.dat", text).unwrap_or_else(|e| panic!("{e}"));
    let Command::Updates(u) = &cmds[0].0 else {
        panic!("updates")
    };
    let Update::Insert(_, row) = &u[0] else {
        panic!("insert")
    };
    assert_eq!(row[0], Value::signed(-5));
    assert_eq!(row[1], Value::set_from(vec![Value::bit(1), Value::bit(3)]));
    assert_eq!(
        row[2],
        Value::map_from(vec![
            (Value::str("a"), Value::bit(1)),
            (Value::str("b"), Value::bit(2))
        ])
    );
    assert_eq!(
        row[3],
        Value::some(Value::Struct(1, vec![Value::bit(7)].into()))
    );
    assert_eq!(cmds[0].1, "t.dat:1:1");
}

#[test]
fn errors_have_positions() {
    let p = program();
    let e = parse_script(&p, "t.dat", "start;\ninsert R(\"x\", \"a\");").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.dat:2:10: error: expected bit<32>, found a string"
    );
    let e = parse_script(&p, "t.dat", "insert Nope(1);").unwrap_err();
    assert_eq!(e.to_string(), "t.dat:1:8: error: unknown relation `Nope`");
    let e = parse_script(&p, "t.dat", "insert O(1);").unwrap_err();
    assert!(e.message.contains("not an input relation"));
    let e = parse_script(&p, "t.dat", "insert C(300, [], [], None, []);").unwrap_err();
    assert_eq!(e.message, "integer literal 300 does not fit in signed<8>");
    let e = parse_script(&p, "t.dat", "insert R(1);").unwrap_err();
    assert!(e.message.contains("has 2 columns"));
}

#[test]
fn record_relation_rows() {
    let p = rulec::compile_source("t.dl", "input relation W[string]").expect("compile");
    let cmds = parse_script(&p, "t.dat", "insert W[\"a\"];").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cmds[0].0,
        Command::Updates(vec![Update::Insert(0, vec![Value::str("a")])])
    );
}

#[test]
fn script_strings_are_not_interpolated() {
    let p = program();
    let cmds = parse_script(&p, "t.dat", r#"insert R(1, "a${b}\"c\u{1}");"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cmds[0].0,
        Command::Updates(vec![Update::Insert(
            0,
            vec![Value::bit(1), Value::str("a${b}\"c\u{1}")]
        )])
    );
}
