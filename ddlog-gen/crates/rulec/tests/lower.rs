//! Type checking and lowering unit tests: the IR a rule lowers to.

use rulec::compile_source;
use rulec::ir::{BinOp, BodyItem, Builtin, Callee, Expr, Pattern, Program};
use rulec::types::Type;
use rulec::value::Value;

fn compile(src: &str) -> Program {
    compile_source("t.dl", src).unwrap_or_else(|e| panic!("{e}"))
}

fn err(src: &str) -> String {
    compile_source("t.dl", src)
        .expect_err("should fail")
        .to_string()
}

fn user_rules(p: &Program, head: &str) -> Vec<rulec::ir::Rule> {
    let id = p.relation_id(head).expect("relation");
    p.rules.iter().filter(|r| r.head == id).cloned().collect()
}

const GRAPH: &str = "input relation Edge(a: bit<32>, b: bit<32>)\n";

#[test]
fn bound_variable_becomes_join_key() {
    let p = compile(&format!(
        "{GRAPH}output relation P(a: bit<32>, c: bit<32>)\nP(a, c) :- Edge(a, b), Edge(b, c)."
    ));
    let r = &user_rules(&p, "P")[0];
    assert_eq!(
        r.body[0],
        BodyItem::Atom {
            rel: 0,
            args: vec![Pattern::Bind, Pattern::Bind]
        }
    );
    assert_eq!(
        r.body[1],
        BodyItem::Atom {
            rel: 0,
            args: vec![Pattern::Eq(Box::new(Expr::Var(1))), Pattern::Bind]
        }
    );
    // `b` (slot 1) is dead after the join: projected away.
    assert_eq!(r.body[2], BodyItem::Project(vec![0, 2]));
    assert_eq!(r.head_exprs, vec![Expr::Var(0), Expr::Var(1)]);
}

#[test]
fn literal_argument_is_eq_and_wild_is_wild() {
    let p = compile(&format!(
        "{GRAPH}output relation P(a: bit<32>)\nP(a) :- Edge(a, 7), Edge(_, a)."
    ));
    let r = &user_rules(&p, "P")[0];
    assert_eq!(
        r.body[0],
        BodyItem::Atom {
            rel: 0,
            args: vec![
                Pattern::Bind,
                Pattern::Eq(Box::new(Expr::Const(Value::bit(7))))
            ]
        }
    );
    assert_eq!(
        r.body[1],
        BodyItem::Atom {
            rel: 0,
            args: vec![Pattern::Wild, Pattern::Eq(Box::new(Expr::Var(0)))]
        }
    );
}

#[test]
fn repeated_variable_in_one_atom_filters() {
    let p = compile(&format!(
        "{GRAPH}output relation L(a: bit<32>)\nL(a) :- Edge(a, a)."
    ));
    let r = &user_rules(&p, "L")[0];
    assert_eq!(
        r.body[0],
        BodyItem::Atom {
            rel: 0,
            args: vec![Pattern::Bind, Pattern::Bind]
        }
    );
    assert_eq!(
        r.body[1],
        BodyItem::Filter(Expr::Binary {
            op: BinOp::Eq,
            ty: Type::Bit(32),
            lhs: Box::new(Expr::Var(1)),
            rhs: Box::new(Expr::Var(0))
        })
    );
    assert_eq!(r.body[2], BodyItem::Project(vec![0]));
}

#[test]
fn negation_condition_and_let() {
    let p = compile(&format!(
        "{GRAPH}relation Bad(a: bit<32>)\noutput relation G(a: bit<32>, n: bit<32>)\n\
         G(a, n) :- Edge(a, _), not Bad(a), a > 3, var n = a + 1."
    ));
    let r = &user_rules(&p, "G")[0];
    assert_eq!(
        r.body[1],
        BodyItem::Not {
            rel: 1,
            args: vec![Pattern::Eq(Box::new(Expr::Var(0)))]
        }
    );
    let BodyItem::Filter(Expr::Binary {
        op: BinOp::Gt,
        ty: Type::Bit(32),
        rhs,
        ..
    }) = &r.body[2]
    else {
        panic!("{:?}", r.body[2])
    };
    assert_eq!(**rhs, Expr::Const(Value::bit(3)));
    assert!(matches!(
        &r.body[3],
        BodyItem::Let {
            pattern: Pattern::Bind,
            ..
        }
    ));
}

#[test]
fn flatmap_and_group_by() {
    let p = compile(
        "input relation R(k: string, vs: Vec<bit<16>>)\noutput relation S(k: string, n: bit<64>, m: bit<16>)\n\
         S(k, n, m) :- R(k, vs), var v = FlatMap(vs), var g = v.group_by(k), var n = g.count(), var m = g.max().",
    );
    let r = &user_rules(&p, "S")[0];
    assert!(matches!(
        &r.body[1],
        BodyItem::FlatMap {
            expr: Expr::Var(1),
            pattern: Pattern::Bind
        }
    ));
    let gb = r
        .body
        .iter()
        .find(|b| matches!(b, BodyItem::GroupBy { .. }))
        .expect("group_by");
    let BodyItem::GroupBy { by, .. } = gb else {
        unreachable!()
    };
    assert_eq!(by.len(), 1);
    let counts = r
        .body
        .iter()
        .filter(|b| {
            matches!(
                b,
                BodyItem::Let {
                    expr: Expr::Call {
                        func: Callee::Builtin(Builtin::GroupCount),
                        ..
                    },
                    ..
                }
            )
        })
        .count();
    assert_eq!(counts, 1);
}

#[test]
fn strata_order_and_recursion() {
    let p = compile(&format!(
        "{GRAPH}relation Reach(a: bit<32>, b: bit<32>)\nReach(a, b) :- Edge(a, b).\nReach(a, c) :- Reach(a, b), Edge(b, c).\n\
         output relation NotReach(a: bit<32>, b: bit<32>)\nNotReach(a, b) :- Edge(a, _), Edge(_, b), not Reach(a, b)."
    ));
    let reach = p.relation_id("Reach").expect("Reach");
    let nr = p.relation_id("NotReach").expect("NotReach");
    let pos = |r| {
        p.strata
            .iter()
            .position(|s| s.relations.contains(&r))
            .expect("stratum")
    };
    assert!(pos(reach) < pos(nr));
    assert!(p.strata[pos(reach)].recursive);
    assert!(!p.strata[pos(nr)].recursive);
    assert_eq!(p.strata[pos(reach)].rules.len(), 2);
    assert!(
        p.strata.iter().all(|s| !s.relations.contains(&0)),
        "inputs belong to no stratum"
    );
}

#[test]
fn mutual_recursion_is_one_stratum() {
    let p = compile(&format!(
        "{GRAPH}relation Even(a: bit<32>)\nrelation Odd(a: bit<32>)\nEven(a) :- Edge(a, a).\n\
         Odd(b) :- Even(a), Edge(a, b).\nEven(b) :- Odd(a), Edge(a, b)."
    ));
    let e = p.relation_id("Even").expect("Even");
    let s = p
        .strata
        .iter()
        .find(|s| s.relations.contains(&e))
        .expect("stratum");
    assert_eq!(s.relations.len(), 2);
    assert!(s.recursive);
}

#[test]
fn literals_take_context_types() {
    let p = compile("output relation S(a: signed<8>, b: bigint, c: Option<bit<4>>)\nS(-3, 5, Some{2}).\nS(1, -7, None).");
    let r = &user_rules(&p, "S")[0];
    assert_eq!(r.head_exprs[0], Expr::Const(Value::signed(-3)));
    assert!(matches!(&r.head_exprs[1], Expr::Const(Value::BigInt(_))));
    assert_eq!(
        r.head_exprs[2],
        Expr::Struct {
            ctor: 1,
            fields: vec![Expr::Const(Value::bit(2))]
        }
    );
    assert!(err("output relation S(a: bit<4>)\nS(16).").contains("does not fit in bit<4>"));
}

#[test]
fn methods_and_overloads_resolve() {
    let p = compile(
        "input relation R(s: string, v: Vec<string>, m: Map<string, bit<8>>, t: Set<bit<8>>)\n\
         output relation O(a: bit<64>, b: bit<64>, c: bool, d: bool, e: Option<bit<8>>, f: string)\n\
         O(s.len(), len(v), v.contains(s), t.contains(1), m.get(s), \"${s}-${t.len()}\") :- R(s, v, m, t).",
    );
    let r = &user_rules(&p, "O")[0];
    let callee = |e: &Expr| match e {
        Expr::Call {
            func: Callee::Builtin(b),
            ..
        } => b.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(callee(&r.head_exprs[0]), Builtin::StrLen);
    assert_eq!(callee(&r.head_exprs[1]), Builtin::VecLen);
    assert_eq!(callee(&r.head_exprs[2]), Builtin::VecContains);
    assert_eq!(callee(&r.head_exprs[3]), Builtin::SetContains);
    assert_eq!(callee(&r.head_exprs[4]), Builtin::MapGet);
    assert!(matches!(
        &r.head_exprs[5],
        Expr::Binary {
            op: BinOp::Concat,
            ..
        }
    ));
}

#[test]
fn functions_match_and_unions() {
    let p = compile(
        "typedef Action = Drop | Output{port: bit<16>}\n\
         function port_of(a: Action): bit<16> { match (a) { Drop -> 0, Output{p} -> p } }\n\
         function twice(x: bit<16>): bit<16> = { var y = x + x; y }\n\
         input relation A(a: Action)\noutput relation P(p: bit<16>)\nP(twice(port_of(a))) :- A(a), a != Drop.",
    );
    let f = p
        .functions
        .iter()
        .find(|f| f.name == "port_of")
        .expect("fn");
    let Expr::Match { arms, .. } = &f.body else {
        panic!("{:?}", f.body)
    };
    assert_eq!(
        arms[1].0,
        Pattern::Struct {
            ctor: 1,
            fields: vec![Pattern::Bind]
        }
    );
    let g = p.functions.iter().find(|f| f.name == "twice").expect("fn");
    assert!(matches!(
        &g.body,
        Expr::Let {
            pattern: Pattern::Bind,
            ..
        }
    ));
}

#[test]
fn primary_key_expression_reads_columns() {
    let p = compile("input relation R(a: bit<32>, b: string, c: bool) primary key (x) (x.b, x.a)");
    let pk = p.relations[0].primary_key.as_ref().expect("key");
    assert_eq!(pk.expr, Expr::Tuple(vec![Expr::Var(1), Expr::Var(0)]));
    assert_eq!(pk.ty, Type::Tuple(vec![Type::String, Type::Bit(32)]));
}

#[test]
fn prelude_helpers_compile_and_are_callable() {
    let p = compile(
        "input relation Net(cidr: string)\noutput relation Pfx(a: bit<32>, l: bit<8>, inside: bool)\n\
         Pfx(a, l, ipv4_in_prefix(a, ipv4_network(a, l), l)) :- Net(c), Some{(var a, var l)} = ipv4_prefix_parse(c).",
    );
    assert!(p.functions.iter().any(|f| f.name == "ipv6_prefix_parse"));
}

#[test]
fn type_errors() {
    assert!(err(&format!(
        "{GRAPH}output relation S(a: string)\nS(a) :- Edge(a, _)."
    ))
    .ends_with("expected string, found bit<32>"));
    assert!(
        err("output relation S(a: bit<8>)\nS(x) :- var x = \"a\" + \"b\".")
            .contains("operator `+` cannot be applied to string")
    );
    assert!(err("output relation S(a: bool)\nS(true) :- var x = None.")
        .contains("cannot infer the type of `None`"));
}

#[test]
fn literal_bound_by_var_takes_type_from_later_use() {
    let p = compile("output relation S(a: bit<32>, b: string)\nS(x, \"a\") :- var x = 5.");
    let r = &user_rules(&p, "S")[0];
    assert_eq!(
        r.body[0],
        BodyItem::Let {
            expr: Expr::Const(Value::bit(5)),
            pattern: Pattern::Bind
        }
    );
}

#[test]
fn record_relations_have_one_column() {
    let p = compile(
        "input relation Port(id: bit<32>, sw: bit<32>)\nrelation Warning[string]\n\
         Warning[\"port ${p} is on switches ${a} and ${b}\"] :- Port(p, a), Port(p, b), a < b.\n\
         output relation Warned(w: string)\nWarned(w) :- Warning[w], not Warning[\"x\"].",
    );
    let w = p.relation_id("Warning").expect("Warning");
    assert_eq!(
        p.relations[w].columns,
        vec![(rulec::parser::RECORD_COLUMN.to_string(), Type::String)]
    );
    let r = &user_rules(&p, "Warned")[0];
    assert_eq!(
        r.body[0],
        BodyItem::Atom {
            rel: w,
            args: vec![Pattern::Bind]
        }
    );
}

#[test]
fn imperative_constructs_are_rejected_clearly() {
    assert!(
        err("function f(x: bit<8>): bit<8> { var y = x; y = y + 1; y }")
            .contains("assignment is not supported")
    );
    assert!(
        err("function f(v: Vec<bit<8>>): bit<8> { for (x in v) { x }; 0 }")
            .contains("`for` is not supported")
    );
}

#[test]
fn group_by_resets_the_row_to_keys_and_group() {
    let p = compile(
        "input relation P(sw: bit<32>, port: bit<16>, name: string)\noutput relation C(sw: bit<32>, n: bit<64>, k: bit<32>)\n\
         C(sw, n, k) :- P(sw, port, _), var g = port.group_by(sw), var n = g.count(), var k = g.key().",
    );
    let r = &user_rules(&p, "C")[0];
    assert_eq!(
        r.body[1],
        BodyItem::GroupBy {
            by: vec![0],
            value: Expr::Var(1)
        }
    );
    let count = Expr::Call {
        func: Callee::Builtin(Builtin::GroupCount),
        args: vec![Expr::Var(1)],
    };
    assert_eq!(
        r.body[2],
        BodyItem::Let {
            expr: count,
            pattern: Pattern::Bind
        }
    );
    let key = Expr::Call {
        func: Callee::Builtin(Builtin::GroupKey),
        args: vec![Expr::Var(1)],
    };
    assert!(r.body.contains(&BodyItem::Let {
        expr: key,
        pattern: Pattern::Bind
    }));
    assert_eq!(r.head_exprs[0], Expr::Var(0));
}

#[test]
fn literal_vars_take_types_from_later_operators() {
    let p = compile("function f(x: bit<32>): bit<32> { var base = 100; x + base }");
    let f = p.functions.iter().find(|f| f.name == "f").expect("f");
    let Expr::Let { value, .. } = &f.body else {
        panic!("{:?}", f.body)
    };
    assert_eq!(**value, Expr::Const(Value::bit(100)));
    let p = compile(&format!(
        "{GRAPH}output relation S(a: bit<32>)\nS(a) :- Edge(a, _), var lim = 10, a < lim."
    ));
    let r = &user_rules(&p, "S")[0];
    assert!(r.body.iter().any(|b| matches!(
        b,
        BodyItem::Let {
            expr: Expr::Const(v),
            ..
        } if *v == Value::bit(10)
    )));
}

#[test]
fn first_error_in_source_order_wins() {
    let e = compile_source(
        "t.dl",
        "output relation S(a: bit<8>)\nS(\"x\").\nfunction f(): bit<8> = \"y\"",
    )
    .unwrap_err();
    assert_eq!((e.line, e.col), (2, 3));
}

#[test]
fn match_must_be_exhaustive() {
    let act = "typedef Action = Drop | Output{port: bit<16>}\n";
    compile(&format!(
        "{act}function f(a: Action): bit<16> = match (a) {{ Drop -> 0, Output{{p}} -> p }}"
    ));
    compile(&format!("{act}function f(a: Option<(bool, Action)>): bit<16> = match (a) {{ None -> 0, Some{{(true, _)}} -> 1, Some{{(false, Drop)}} -> 2, Some{{(_, Output{{p}})}} -> p }}"));
    compile("function f(x: bit<8>): bool = match (x) { 0 -> true, _ -> false }");
    let e = err(&format!(
        "{act}function f(a: Action): bit<16> = match (a) {{ Output{{p}} -> p }}"
    ));
    assert!(e.contains("does not cover every value"), "{e}");
    let e = err("function f(a: Option<bool>): bit<8> = match (a) { None -> 0, Some{true} -> 1 }");
    assert!(e.contains("does not cover every value"), "{e}");
    assert!(
        err("function f(x: string): bool = match (x) { \"a\" -> true }").contains("does not cover")
    );
}
