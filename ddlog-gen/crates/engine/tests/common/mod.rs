//! Hand-built IR programs shared by the engine's integration tests (written without the
//! `rulec` front end so the engine is tested on its own).
#![allow(dead_code, reason = "each test binary uses a different subset")]

use rulec::ir::{
    BinOp, BodyItem, Builtin, Callee, Expr, Pattern, PrimaryKey, Program, Relation, Role, Rule,
    Stratum,
};
use rulec::types::Type;
use rulec::value::Value;

/// `Var(i)`.
pub fn var(i: usize) -> Expr {
    Expr::Var(i)
}

/// `Eq(Var(i))` pattern.
pub fn eqv(i: usize) -> Pattern {
    Pattern::Eq(Box::new(Expr::Var(i)))
}

/// Builtin call.
pub fn call(b: Builtin, args: Vec<Expr>) -> Expr {
    Expr::Call {
        func: Callee::Builtin(b),
        args,
    }
}

/// Binary operator on `bit<32>`.
pub fn bin(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        ty: Type::Bit(32),
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    }
}

/// A program under construction.
#[derive(Default)]
pub struct Builder {
    /// The program.
    pub prog: Option<Program>,
}

fn rel(name: &str, role: Role, cols: &[(&str, Type)]) -> Relation {
    Relation {
        name: name.into(),
        role,
        columns: cols
            .iter()
            .map(|(n, t)| ((*n).to_string(), t.clone()))
            .collect(),
        primary_key: None,
        source: String::new(),
    }
}

fn rule(head: usize, head_exprs: Vec<Expr>, body: Vec<BodyItem>) -> Rule {
    Rule {
        head,
        head_exprs,
        body,
        source: String::new(),
    }
}

fn atom(rel: usize, args: Vec<Pattern>) -> BodyItem {
    BodyItem::Atom { rel, args }
}

/// Relation ids of [`network`].
pub mod n {
    pub const PORT: usize = 0;
    pub const SWITCH: usize = 1;
    pub const LINK: usize = 2;
    pub const ACL: usize = 3;
    pub const START: usize = 4;
    pub const HAS_PORT: usize = 5;
    pub const REACH: usize = 6;
    pub const OUT_PORT: usize = 7;
    pub const OUT_DROP: usize = 8;
    pub const OUT_REACH: usize = 9;
    pub const OUT_COUNT: usize = 10;
    pub const OUT_MINMAX: usize = 11;
    pub const OUT_ACL: usize = 12;
    pub const OUT_TOTAL: usize = 13;
    pub const EVEN: usize = 14;
    pub const ODD: usize = 15;
    pub const FACT: usize = 16;
    pub const OUT_NO_LINK: usize = 17;
    pub const OUT_DIV: usize = 18;
}

/// A program exercising joins, antijoins (with and without projection), transitive
/// closure, mutual recursion, `group_by` (count, min, max, `to_vec`; with and without keys),
/// FlatMap, a fact, and a runtime error (division by zero) that drops rows.
pub fn network() -> Program {
    let b32 = Type::Bit(32);
    let relations = vec![
        {
            let mut r = rel(
                "Port",
                Role::Input,
                &[
                    ("p", b32.clone()),
                    ("sw", b32.clone()),
                    ("mac", b32.clone()),
                ],
            );
            r.primary_key = Some(PrimaryKey {
                expr: var(0),
                ty: b32.clone(),
            });
            r
        },
        rel(
            "Switch",
            Role::Input,
            &[("sw", b32.clone()), ("key", b32.clone())],
        ),
        rel(
            "Link",
            Role::Input,
            &[("a", b32.clone()), ("b", b32.clone())],
        ),
        rel(
            "Acl",
            Role::Input,
            &[
                ("sw", b32.clone()),
                ("prio", b32.clone()),
                ("text", Type::String),
            ],
        ),
        rel("Start", Role::Input, &[("x", b32.clone())]),
        rel("SwitchHasPort", Role::Internal, &[("sw", b32.clone())]),
        rel(
            "Reach",
            Role::Internal,
            &[("a", b32.clone()), ("b", b32.clone())],
        ),
        rel(
            "OutPort",
            Role::Output,
            &[
                ("sw", b32.clone()),
                ("p", b32.clone()),
                ("key", b32.clone()),
            ],
        ),
        rel("OutDrop", Role::Output, &[("sw", b32.clone())]),
        rel(
            "OutReach",
            Role::Output,
            &[("a", b32.clone()), ("b", b32.clone())],
        ),
        rel(
            "OutCount",
            Role::Output,
            &[("sw", b32.clone()), ("n", Type::USIZE)],
        ),
        rel(
            "OutMinMax",
            Role::Output,
            &[
                ("sw", b32.clone()),
                ("lo", b32.clone()),
                ("hi", b32.clone()),
                ("all", Type::Vec(Box::new(b32.clone()))),
            ],
        ),
        rel(
            "OutAcl",
            Role::Output,
            &[
                ("sw", b32.clone()),
                ("prio", b32.clone()),
                ("m", Type::String),
            ],
        ),
        rel("OutTotal", Role::Output, &[("n", Type::USIZE)]),
        rel("Even", Role::Output, &[("x", b32.clone())]),
        rel("Odd", Role::Output, &[("x", b32.clone())]),
        rel(
            "Fact",
            Role::Output,
            &[("x", b32.clone()), ("s", Type::String)],
        ),
        rel("OutNoLink", Role::Output, &[("sw", b32.clone())]),
        rel(
            "OutDiv",
            Role::Output,
            &[("sw", b32.clone()), ("q", b32.clone())],
        ),
    ];
    let group_count = |by: Vec<usize>, value: Expr| {
        vec![
            atom(n::PORT, vec![Pattern::Bind, Pattern::Bind, Pattern::Bind]),
            BodyItem::GroupBy { by, value },
        ]
    };
    let rules = vec![
        // 0: SwitchHasPort(sw) :- Port(_, sw, _).
        rule(
            n::HAS_PORT,
            vec![var(0)],
            vec![atom(
                n::PORT,
                vec![Pattern::Wild, Pattern::Bind, Pattern::Wild],
            )],
        ),
        // 1: Reach(a, b) :- Link(a, b).
        rule(
            n::REACH,
            vec![var(0), var(1)],
            vec![atom(n::LINK, vec![Pattern::Bind, Pattern::Bind])],
        ),
        // 2: Reach(a, c) :- Reach(a, b), Link(b, c).
        rule(
            n::REACH,
            vec![var(0), var(2)],
            vec![
                atom(n::REACH, vec![Pattern::Bind, Pattern::Bind]),
                atom(n::LINK, vec![eqv(1), Pattern::Bind]),
            ],
        ),
        // 3: OutPort(sw, p, key) :- Port(p, sw, _), Switch(sw, key).
        rule(
            n::OUT_PORT,
            vec![var(1), var(0), var(2)],
            vec![
                atom(n::PORT, vec![Pattern::Bind, Pattern::Bind, Pattern::Wild]),
                atom(n::SWITCH, vec![eqv(1), Pattern::Bind]),
            ],
        ),
        // 4: OutDrop(sw) :- Switch(sw, _), not SwitchHasPort(sw).
        rule(
            n::OUT_DROP,
            vec![var(0)],
            vec![
                atom(n::SWITCH, vec![Pattern::Bind, Pattern::Wild]),
                BodyItem::Not {
                    rel: n::HAS_PORT,
                    args: vec![eqv(0)],
                },
            ],
        ),
        // 5: OutReach(a, b) :- Reach(a, b), a != b.
        rule(
            n::OUT_REACH,
            vec![var(0), var(1)],
            vec![
                atom(n::REACH, vec![Pattern::Bind, Pattern::Bind]),
                BodyItem::Filter(bin(BinOp::Neq, var(0), var(1))),
            ],
        ),
        // 6: OutCount(sw, n) :- Port(p, sw, _), var g = p.group_by(sw), var n = g.count().
        rule(n::OUT_COUNT, vec![var(0), var(2)], {
            let mut b = group_count(vec![1], var(0));
            b.push(BodyItem::Let {
                expr: call(Builtin::GroupCount, vec![var(1)]),
                pattern: Pattern::Bind,
            });
            b
        }),
        // 7: OutMinMax(sw, min, max, to_vec) over mac.
        rule(
            n::OUT_MINMAX,
            vec![
                var(0),
                call(Builtin::GroupMin, vec![var(1)]),
                call(Builtin::GroupMax, vec![var(1)]),
                call(Builtin::GroupToVec, vec![var(1)]),
            ],
            group_count(vec![1], var(2)),
        ),
        // 8: OutAcl(sw, prio, m) :- Acl(sw, prio, text), Switch(sw, _), var m = FlatMap(split(text, ";")).
        rule(
            n::OUT_ACL,
            vec![var(0), var(1), var(3)],
            vec![
                atom(n::ACL, vec![Pattern::Bind, Pattern::Bind, Pattern::Bind]),
                atom(n::SWITCH, vec![eqv(0), Pattern::Wild]),
                BodyItem::FlatMap {
                    expr: call(
                        Builtin::StrSplit,
                        vec![var(2), Expr::Const(Value::str(";"))],
                    ),
                    pattern: Pattern::Bind,
                },
            ],
        ),
        // 9: OutTotal(n) :- Port(p, _, _), var g = p.group_by(), var n = g.count().
        rule(
            n::OUT_TOTAL,
            vec![call(Builtin::GroupCount, vec![var(0)])],
            group_count(vec![], var(0)),
        ),
        // 10: Even(a) :- Start(a).
        rule(
            n::EVEN,
            vec![var(0)],
            vec![atom(n::START, vec![Pattern::Bind])],
        ),
        // 11: Odd(b) :- Even(a), Link(a, b).
        rule(
            n::ODD,
            vec![var(1)],
            vec![
                atom(n::EVEN, vec![Pattern::Bind]),
                atom(n::LINK, vec![eqv(0), Pattern::Bind]),
            ],
        ),
        // 12: Even(b) :- Odd(a), Link(a, b).
        rule(
            n::EVEN,
            vec![var(1)],
            vec![
                atom(n::ODD, vec![Pattern::Bind]),
                atom(n::LINK, vec![eqv(0), Pattern::Bind]),
            ],
        ),
        // 13: Fact(7, "seven").
        rule(
            n::FACT,
            vec![Expr::Const(Value::bit(7)), Expr::Const(Value::str("seven"))],
            vec![],
        ),
        // 14: OutNoLink(sw) :- Switch(sw, _), not Link(sw, _).
        rule(
            n::OUT_NO_LINK,
            vec![var(0)],
            vec![
                atom(n::SWITCH, vec![Pattern::Bind, Pattern::Wild]),
                BodyItem::Not {
                    rel: n::LINK,
                    args: vec![eqv(0), Pattern::Wild],
                },
            ],
        ),
        // 15: OutDiv(sw, key / (sw % 3)) :- Switch(sw, key).  (fails for sw % 3 == 0)
        rule(
            n::OUT_DIV,
            vec![
                var(0),
                bin(
                    BinOp::Div,
                    var(1),
                    bin(BinOp::Mod, var(0), Expr::Const(Value::bit(3))),
                ),
            ],
            vec![atom(n::SWITCH, vec![Pattern::Bind, Pattern::Bind])],
        ),
    ];
    let nonrec = |rel: usize, rules: Vec<usize>| Stratum {
        relations: vec![rel],
        rules,
        recursive: false,
    };
    let strata = vec![
        nonrec(n::HAS_PORT, vec![0]),
        Stratum {
            relations: vec![n::REACH],
            rules: vec![1, 2],
            recursive: true,
        },
        nonrec(n::OUT_PORT, vec![3]),
        nonrec(n::OUT_DROP, vec![4]),
        nonrec(n::OUT_REACH, vec![5]),
        nonrec(n::OUT_COUNT, vec![6]),
        nonrec(n::OUT_MINMAX, vec![7]),
        nonrec(n::OUT_ACL, vec![8]),
        nonrec(n::OUT_TOTAL, vec![9]),
        Stratum {
            relations: vec![n::EVEN, n::ODD],
            rules: vec![10, 11, 12],
            recursive: true,
        },
        nonrec(n::FACT, vec![13]),
        nonrec(n::OUT_NO_LINK, vec![14]),
        nonrec(n::OUT_DIV, vec![15]),
    ];
    Program {
        types: vec![],
        relations,
        functions: vec![],
        rules,
        strata,
    }
}
