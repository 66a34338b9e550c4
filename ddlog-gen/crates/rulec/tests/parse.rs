//! Parser unit tests: declarations, rules, precedence, DDlog-specific lexing.

use rulec::ast::{Args, BodyItem, Decl, ExprKind};
use rulec::ir::BinOp;
use rulec::parser::{parse_program, Parser};

fn expr(text: &str) -> rulec::ast::Expr {
    let toks = rulec::lexer::Lexer::new(text, 0).tokenize().expect("lex");
    let mut p = Parser::new(toks);
    let e = p.expr().expect("parse");
    assert!(p.at_eof(), "trailing input in {text}");
    e
}

fn show(e: &rulec::ast::Expr) -> String {
    match &e.kind {
        ExprKind::Binary(op, a, b) => format!("({} {op:?} {})", show(a), show(b)),
        ExprKind::Unary(op, a) => format!("({op:?} {})", show(a)),
        ExprKind::Var(v) => v.clone(),
        ExprKind::Int(n, _) => n.to_string(),
        ExprKind::Field(a, f) => format!("{}.{f}", show(a)),
        ExprKind::Method(a, f, args) => format!("{}.{f}/{}", show(a), args.len()),
        ExprKind::Cast(a, _) => format!("({} as _)", show(a)),
        other => format!("{other:?}"),
    }
}

#[test]
fn precedence_follows_ddlog() {
    assert_eq!(show(&expr("a + b * c")), "(a Add (b Mul c))");
    assert_eq!(show(&expr("a - b - c")), "((a Sub b) Sub c)");
    // As in DDlog, comparisons bind tighter than `&`, `^` and `|`.
    assert_eq!(show(&expr("a & 1 == 0")), "(a BitAnd (1 Eq 0))");
    assert_eq!(show(&expr("(a & 1) == 0")), "((a BitAnd 1) Eq 0)");
    assert_eq!(show(&expr("a == b == c")), "((a Eq b) Eq c)");
    assert_eq!(show(&expr("-x as bit<8>")), "(Neg (x as _))");
    assert!(matches!(expr("x[7:0]").kind, ExprKind::Slice(_, 7, 0)));
    assert_eq!(show(&expr("a == 1 and b or c")), "(((a Eq 1) And b) Or c)");
    assert_eq!(show(&expr("x << 2 + 1")), "(x Shl (2 Add 1))");
    assert_eq!(show(&expr("-x.f")), "(Neg x.f)");
    assert_eq!(show(&expr("x as bit<8> + 1")), "((x as _) Add 1)");
    assert_eq!(
        show(&expr("a | b ^ c & d")),
        "(a BitOr (b BitXor (c BitAnd d)))"
    );
    assert_eq!(show(&expr("v.len() + 1")), "(v.len/0 Add 1)");
}

#[test]
fn comparisons_do_not_chain() {
    let toks = rulec::lexer::Lexer::new("a < b < c", 0)
        .tokenize()
        .expect("lex");
    assert!(Parser::new(toks).expr().is_err());
}

#[test]
fn literals() {
    assert!(matches!(expr("0x1f").kind, ExprKind::Int(ref n, None) if *n == 31.into()));
    assert!(
        matches!(expr("8'hff").kind, ExprKind::Int(ref n, Some((false, 8))) if *n == 255.into())
    );
    assert!(
        matches!(expr("32'sd5").kind, ExprKind::Int(ref n, Some((true, 32))) if *n == 5.into())
    );
    assert!(matches!(expr(r#""a\n\"b""#).kind, ExprKind::Str(ref s) if s == "a\n\"b"));
    let ExprKind::Interp(parts) = expr(r#""x=${x + 1}!""#).kind else {
        panic!("interp")
    };
    assert_eq!(parts.len(), 3);
}

#[test]
fn rules_and_relations() {
    let src = r"
        import net::addr
        typedef Action = Drop | Output{port: bit<16>}
        input relation R(a: bit<32>, b: Vec<Option<bit<8>>>) primary key (x) x.a
        output relation S(a: bit<32>)
        S(x), S(y) :- R(x, _), R(.a = y), not R(x, [None]), x > 3, var z = x + 1,
            var w = FlatMap([1, 2]), Some{var q} = Some{z}.
        S(1).
        function f(x: bit<32>): bit<32> { var y = x; y + 1 }
    ";
    let decls = parse_program(src, 0).expect("parse");
    assert!(matches!(&decls[0], Decl::Import { path, .. } if path == &["net", "addr"]));
    let Decl::Relation {
        key: Some((v, _)), ..
    } = &decls[2]
    else {
        panic!("key")
    };
    assert_eq!(v, "x");
    let Decl::Rule(r) = &decls[4] else {
        panic!("rule")
    };
    assert_eq!(r.heads.len(), 2);
    assert_eq!(r.body.len(), 7);
    assert!(
        matches!(&r.body[1], BodyItem::Atom { neg: false, atom } if matches!(atom.args, Args::Named(_)))
    );
    assert!(matches!(&r.body[2], BodyItem::Atom { neg: true, .. }));
    assert!(matches!(&r.body[3], BodyItem::Cond(_)));
    assert!(matches!(&r.body[6], BodyItem::Let { .. }));
    let Decl::Rule(fact) = &decls[5] else {
        panic!("fact")
    };
    assert!(fact.body.is_empty());
    assert!(matches!(&decls[6], Decl::Function { .. }));
}

#[test]
fn rule_terminator_is_not_a_field_access() {
    let src = "input relation R(a: bit<32>)\noutput relation S(a: bit<32>)\nS(x) :- R(x), x > 3.\ninput relation T(a: bit<32>)\n";
    let decls = parse_program(src, 0).expect("parse");
    assert_eq!(decls.len(), 4);
}

#[test]
fn syntax_error_position() {
    let e = parse_program("output relation S(a: bit<32>)\nS(1 2).", 0).unwrap_err();
    assert_eq!((e.line, e.col), (2, 5));
    assert_eq!(e.message, "expected `)` but found `2`");
    let _ = BinOp::Add;
}

#[test]
fn byte_order_mark_and_crlf_are_accepted() {
    let src = "\u{feff}input relation R(a: bit<32>)\r\noutput relation S(a: bit<32>)\r\nS(x) :- R(x). // done\r\n";
    assert_eq!(parse_program(src, 0).expect("parse").len(), 3);
}
