"""datalog-conformance adapter: translate a case's program into our DDlog dialect, run it.

The suite's programs are plain Datalog (``head :- lit, lit.`` with ``not``/``!``,
comparisons and integer arithmetic). Translation, per program:

* **Names.** Predicate ``p`` becomes relation ``R_p`` (DDlog relations are capitalised);
  variable ``X`` becomes ``v_X``; ``_`` stays a wildcard.
* **Variables vs constants.** Programs from Prolog-like sources (Nemo, hand-written
  cases) spell variables with a capital letter and constants in lower case; Soufflé and
  crepe programs use any identifier as a variable and quote string constants. A program
  that has any capitalised argument identifier is read the Prolog way; otherwise every
  bare identifier is a variable.
* **Types.** Column types are inferred: from the facts (``int`` → ``signed<64>``,
  ``str`` → ``string``), then propagated through rules to a fixed point; columns nothing
  constrains are ``string``. A literal whose constant (or variable) has the other type
  than its column can never match, exactly as in an untyped engine where ``"6" != 6``:
  a positive atom or ``=`` of that kind drops its rule, a negated one is vacuously true
  and is dropped.
* **Relations.** A predicate with rules is an ``output relation``; if it also has facts,
  the facts go to an ``input relation I_p`` and ``R_p(..) :- I_p(..)`` adds them. Other
  predicates (facts only, or neither) are input relations. Facts are inserted through a
  ``loom_ddlog`` transaction, so they go through the binding's type conversion.
* **Body order.** DDlog evaluates a body left to right, so positive atoms come first,
  then comparisons, then negations (Datalog bodies are unordered).
* **Existential variables under negation** (``not s3(X, P, P)`` with ``P`` bound nowhere
  else) are Nemo's reading; in DDlog such a variable is an error. For programs whose
  source uses that reading (see ``existential_negation``) the negated atom becomes
  ``not N_k(bound vars)`` over an auxiliary ``N_k(bound vars) :- R_s3(..)`` — how one
  writes it by hand in DDlog.

Errors come from our compiler and binding, classified by what they report: unbound
variables and ``_`` in heads are ``SafetyViolationError`` (codes ``unbound_variable``,
``safety_violations``, ``unsafe_negation``), unstratifiable negation is
``StratificationError`` (``cyclic_negation``), and a wrong number of columns is
``ArityError`` (``arity_mismatch``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from datalog_conformance.schema import Model, Program

from loom_ddlog import CompileError
from loom_ddlog import Program as LoomProgram


class ConformanceError(Exception):
    """An error the suite expects, with the suite's `code` for it."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


class SafetyViolationError(ConformanceError):
    """A variable is not range-restricted (head, expression or negated atom), or `_` heads."""


class StratificationError(ConformanceError):
    """Negation through recursion."""


class ArityError(ConformanceError):
    """A predicate is used with different numbers of arguments."""


class NotTranslatable(Exception):
    """The program uses something this adapter does not translate (a failing case)."""


# ---------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>\d+)|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"""
    r"""|(?P<op>:-|<=|>=|!=|==|<|>|=|\+|-|\*|/|%|\(|\)|,|\.|!))"""
)


@dataclass(frozen=True)
class Var:
    """A variable."""

    name: str


@dataclass(frozen=True)
class Wild:
    """The wildcard `_`."""


@dataclass(frozen=True)
class Const:
    """An integer or string constant."""

    value: int | str


@dataclass(frozen=True)
class BinOp:
    """Integer arithmetic."""

    op: str
    lhs: Term
    rhs: Term


Term = Var | Wild | Const | BinOp


@dataclass(frozen=True)
class Atom:
    """`p(args)`, possibly negated."""

    pred: str
    args: tuple[Term, ...]
    negated: bool = False


@dataclass(frozen=True)
class Compare:
    """`lhs op rhs`."""

    op: str
    lhs: Term
    rhs: Term


Literal = Atom | Compare


@dataclass(frozen=True)
class Rule:
    """`head :- body`."""

    head: Atom
    body: tuple[Literal, ...]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise NotTranslatable(f"cannot tokenize {text[pos:]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, prolog_vars: bool) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.prolog_vars = prolog_vars

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise NotTranslatable(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def rule(self) -> Rule:
        head = self.atom()
        body: list[Literal] = []
        if self.peek()[1] == ":-":
            self.take()
            body.append(self.literal())
            while self.peek()[1] == ",":
                self.take()
                body.append(self.literal())
        if self.peek()[1] == ".":
            self.take()
        if self.peek()[0] != "eof":
            raise NotTranslatable(f"unexpected {self.peek()[1]!r}")
        return Rule(head, tuple(body))

    def atom(self, negated: bool = False) -> Atom:
        kind, name = self.take()
        if kind != "id":
            raise NotTranslatable(f"expected a predicate, got {name!r}")
        self.take("(")
        args: list[Term] = []
        if self.peek()[1] != ")":
            args.append(self.expr())
            while self.peek()[1] == ",":
                self.take()
                args.append(self.expr())
        self.take(")")
        return Atom(name, tuple(args), negated)

    def literal(self) -> Literal:
        kind, value = self.peek()
        if (kind == "id" and value == "not" and self.peek(1)[0] == "id") or value == "!":
            self.take()
            return self.atom(negated=True)
        if kind == "id" and self.peek(1)[1] == "(":
            return self.atom()
        if value == "(":
            save = self.i
            self.take()
            try:
                cmp = self.compare()
                self.take(")")
                return cmp
            except NotTranslatable:
                self.i = save
        return self.compare()

    def compare(self) -> Compare:
        lhs = self.expr()
        op = self.take()[1]
        if op not in ("=", "==", "!=", "<", "<=", ">", ">="):
            raise NotTranslatable(f"expected a comparison, got {op!r}")
        return Compare("==" if op == "=" else op, lhs, self.expr())

    def expr(self) -> Term:
        t = self.term()
        while self.peek()[1] in ("+", "-"):
            t = BinOp(self.take()[1], t, self.term())
        return t

    def term(self) -> Term:
        t = self.unary()
        while self.peek()[1] in ("*", "/", "%"):
            t = BinOp(self.take()[1], t, self.unary())
        return t

    def unary(self) -> Term:
        if self.peek()[1] == "-":
            self.take()
            return BinOp("-", Const(0), self.unary())
        kind, value = self.take()
        if kind == "num":
            return Const(int(value))
        if kind == "str":
            return Const(value[1:-1].encode().decode("unicode_escape"))
        if kind == "id":
            if value == "_":
                return Wild()
            if self.prolog_vars and not (value[0].isupper() or value[0] == "_"):
                return Const(value)
            return Var(value)
        if value == "(":
            t = self.expr()
            self.take(")")
            return t
        raise NotTranslatable(f"unexpected {value!r}")


def _uses_prolog_vars(rules: list[str]) -> bool:
    for text in rules:
        toks = _tokens(text)
        for k, (kind, value) in enumerate(toks):
            nxt = toks[k + 1][1] if k + 1 < len(toks) else ""
            if kind == "id" and nxt != "(" and value[0].isupper():
                return True
    return False


# ---------------------------------------------------------------- translation

INT, STR = "signed<64>", "string"


def _type_of(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise NotTranslatable(f"constant {value!r}: only integers and strings are supported")
    return INT if isinstance(value, int) else STR


def _vars(t: Term) -> Iterator[str]:
    if isinstance(t, Var):
        yield t.name
    elif isinstance(t, BinOp):
        yield from _vars(t.lhs)
        yield from _vars(t.rhs)


def _term_type(t: Term, env: dict[str, str]) -> str | None:
    if isinstance(t, Const):
        return _type_of(t.value)
    if isinstance(t, BinOp):
        return INT
    if isinstance(t, Var):
        return env.get(t.name)
    return None


def _quote(s: str) -> str:
    if "${" in s:
        raise NotTranslatable(f"string {s!r} would be interpolated")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render(t: Term) -> str:
    if isinstance(t, Var):
        return f"v_{t.name}"
    if isinstance(t, Wild):
        return "_"
    if isinstance(t, Const):
        return str(t.value) if isinstance(t.value, int) else _quote(t.value)
    return f"({_render(t.lhs)} {t.op} {_render(t.rhs)})"


@dataclass
class Translation:
    """A program in our dialect plus where each predicate's rows live."""

    source: str
    facts: dict[str, list[tuple[Any, ...]]]
    """Input relation → rows to insert."""
    outputs: dict[str, str] = field(default_factory=dict)
    """Predicate → relation to dump."""


def translate(program: Program, *, existential_negation: bool = False) -> Translation:
    """Translate a conformance `Program` into a DDlog program plus its input facts.

    Raises:
        NotTranslatable: a construct outside what this adapter translates.
    """
    prolog = _uses_prolog_vars(program.rules)
    rules = [_Parser(text, prolog).rule() for text in program.rules]
    col: dict[tuple[str, int], str] = {}
    for pred, rows in program.facts.items():
        for row in rows:
            for i, v in enumerate(row):
                col.setdefault((pred, i), _type_of(v))
    _infer(rules, col)

    def ty(pred: str, i: int) -> str:
        return col.get((pred, i), STR)

    out = Translation("", {})
    lines = _declarations(program, rules, ty, out)
    aux: list[str] = []
    for r in rules:
        text = _rule_text(r, ty, existential_negation, aux)
        if text is not None:
            lines.append(text)
    out.source = "\n".join(lines + aux) + "\n"
    return out


def _atoms(r: Rule) -> list[Atom]:
    return [r.head, *(lit for lit in r.body if isinstance(lit, Atom))]


def _declarations(
    program: Program, rules: list[Rule], ty: Callable[[str, int], str], out: Translation
) -> list[str]:
    """Declare every predicate (arity from its first use) and route its facts."""
    arity: dict[str, int] = {p: len(rows[0]) for p, rows in program.facts.items() if rows}
    for r in rules:
        for a in _atoms(r):
            arity.setdefault(a.pred, len(a.args))
    heads = {r.head.pred for r in rules}
    lines: list[str] = []
    for pred, n in arity.items():
        cols = ", ".join(f"c{i}: {ty(pred, i)}" for i in range(n))
        args = ", ".join(f"c{i}" for i in range(n))
        rows = [tuple(r) for r in program.facts.get(pred, [])]
        if pred in heads:
            lines.append(f"output relation R_{pred}({cols})")
            if rows:
                lines.append(f"input relation I_{pred}({cols})")
                lines.append(f"R_{pred}({args}) :- I_{pred}({args}).")
                out.facts[f"I_{pred}"] = rows
        else:
            lines.append(f"input relation R_{pred}({cols})")
            out.facts[f"R_{pred}"] = rows
        out.outputs[pred] = f"R_{pred}"
    return lines


def _infer(rules: list[Rule], col: dict[tuple[str, int], str]) -> None:
    """Propagate column types through rules until nothing changes."""
    while any([_infer_rule(r, col) for r in rules]):
        pass


def _infer_rule(r: Rule, col: dict[tuple[str, int], str]) -> bool:
    env: dict[str, str] = {}
    for lit in r.body:
        if isinstance(lit, Atom) and not lit.negated:
            for i, t in enumerate(lit.args):
                if isinstance(t, Var) and (lit.pred, i) in col:
                    env.setdefault(t.name, col[(lit.pred, i)])
    terms = [t for a in _atoms(r) for t in a.args]
    terms += [t for lit in r.body if isinstance(lit, Compare) for t in (lit.lhs, lit.rhs)]
    for t in terms:
        if isinstance(t, BinOp):
            for v in _vars(t):
                env.setdefault(v, INT)
    changed = False
    for a in _atoms(r):
        for i, t in enumerate(a.args):
            t_ty = _term_type(t, env)
            if t_ty is not None and (a.pred, i) not in col:
                col[(a.pred, i)] = t_ty
                changed = True
    return changed


def _positive_env(r: Rule, ty: Callable[[str, int], str]) -> dict[str, str] | None:
    """Types of the variables bound by positive atoms; None if the rule can never fire."""
    env: dict[str, str] = {}
    for lit in r.body:
        if not isinstance(lit, Atom) or lit.negated:
            continue
        for i, t in enumerate(lit.args):
            want = ty(lit.pred, i)
            if isinstance(t, Const) and _type_of(t.value) != want:
                return None  # can never match: the rule derives nothing
            if isinstance(t, Var) and env.setdefault(t.name, want) != want:
                return None  # one variable in columns of two types: never equal
    return env


def _comparisons(r: Rule, env: dict[str, str]) -> list[str] | None:
    """Render the comparisons; None if one can never hold."""
    out: list[str] = []
    for lit in r.body:
        if not isinstance(lit, Compare):
            continue
        lt, rt = _term_type(lit.lhs, env), _term_type(lit.rhs, env)
        if lt is not None and rt is not None and lt != rt:
            if lit.op == "==":
                return None
            if lit.op == "!=":
                continue
            raise NotTranslatable(f"ordering comparison between {lt} and {rt}")
        out.append(f"{_render(lit.lhs)} {lit.op} {_render(lit.rhs)}")
    return out


def _negation(
    lit: Atom,
    env: dict[str, str],
    ty: Callable[[str, int], str],
    existential_negation: bool,
    aux: list[str],
) -> str | None:
    """Render one negated atom; None if it can never match (so `not` always holds)."""
    for i, t in enumerate(lit.args):
        if isinstance(t, Const) and _type_of(t.value) != ty(lit.pred, i):
            return None
        if isinstance(t, Var) and t.name in env and env[t.name] != ty(lit.pred, i):
            return None
    names = [v for t in lit.args for v in _vars(t)]
    if not existential_negation or all(v in env for v in names):
        return _atom_text(lit)
    keep = sorted({v for v in names if v in env})
    name = f"N_{len(aux)}"
    cols = ", ".join(f"c{i}: {env[v]}" for i, v in enumerate(keep))
    vs = ", ".join(f"v_{v}" for v in keep)
    aux.append(f"relation {name}({cols})")
    aux.append(f"{name}({vs}) :- {_atom_text(Atom(lit.pred, lit.args))}.")
    return f"not {name}({vs})"


def _rule_text(
    r: Rule,
    ty: Callable[[str, int], str],
    existential_negation: bool,
    aux: list[str],
) -> str | None:
    """Render one rule (positive atoms, comparisons, negations), or None if it never fires."""
    env = _positive_env(r, ty)
    if env is None:
        return None
    comparisons = _comparisons(r, env)
    if comparisons is None:
        return None
    body = [_atom_text(a) for a in r.body if isinstance(a, Atom) and not a.negated]
    body += comparisons
    for lit in r.body:
        if isinstance(lit, Atom) and lit.negated:
            text = _negation(lit, env, ty, existential_negation, aux)
            if text is not None:
                body.append(text)
    head = f"R_{r.head.pred}({', '.join(_render(t) for t in r.head.args)})"
    return f"{head} :- {', '.join(body)}." if body else f"{head}."


def _atom_text(a: Atom) -> str:
    text = f"R_{a.pred}({', '.join(_render(t) for t in a.args)})"
    return f"not {text}" if a.negated else text


# ---------------------------------------------------------------- evaluation

_COMPILE_ERRORS: list[tuple[str, type[ConformanceError], str]] = [
    ("not stratifiable", StratificationError, "cyclic_negation"),
    ("in a negated atom", SafetyViolationError, "unsafe_negation"),
    ("is not allowed in a rule head", SafetyViolationError, "safety_violations"),
    ("unbound variable", SafetyViolationError, "unbound_variable"),
    # "relation `r` has 2 columns, but 1 argument is given" / "but 3 arguments are given".
    ("argument is given", ArityError, "arity_mismatch"),
    ("arguments are given", ArityError, "arity_mismatch"),
]


class LoomEvaluator:
    """`DatalogEvaluator` of datalog-conformance, backed by `loom_ddlog`.

    Usable as ``--datalog-evaluator`` when this module is importable; the project's own
    test (``test_conformance.py``) also passes ``existential_negation`` per case source.
    """

    def __init__(self, *, existential_negation: bool = False) -> None:
        """Configure how variables that occur only under `not` are read."""
        self.existential_negation = existential_negation

    def evaluate(self, program: Program) -> Model:
        """Translate, compile, insert the facts in one transaction, dump every predicate."""
        tr = translate(program, existential_negation=self.existential_negation)
        try:
            prog = LoomProgram.compile(tr.source, name="case.dl")
        except CompileError as e:
            for needle, cls, code in _COMPILE_ERRORS:
                if needle in e.message:
                    raise cls(code, f"{e}\n{tr.source}") from e
            raise
        try:
            with prog.transaction() as txn:
                for rel, rows in tr.facts.items():
                    for row in rows:
                        txn.insert(rel, row)
        except ValueError as e:
            if "columns, got" in str(e):
                raise ArityError("arity_mismatch", str(e)) from e
            raise
        return Model(facts={pred: set(prog.dump(rel)) for pred, rel in tr.outputs.items()})
