#!/usr/bin/env python3
"""Differential test against Jinja2 beyond the real templates: random expressions (operators,
filters, tests, methods, subscripts, inline ifs) and random statement nests (for with filters and
else, if/elif/else, namespaces, block sets, break, whitespace markers), generated from fixed seeds,
rendered by Jinja2 (set up as render_reference.py sets it up) and by chat_render_cases, compared
byte for byte; where Jinja2 raises, ours must raise too.

  build/venv/bin/python tests/chat/random_differential.py --tool build/h-chat/tests/chat_render_cases \
      --workdir /tmp/chat_random [--seeds 1 2] [--count 1500]
"""
import argparse
import copy
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_reference as rr  # noqa: E402  (exits 1, failing the test, when Jinja2 is missing)

CONTEXT = {"x": 5, "s": "Hello World", "d": {"k": "v", "n": None}, "l": [3, 1, 2],
           "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
                    {"role": "user", "content": ["p"]}]}

# Jinja2 folds constant subscripts of non-sequences at compile time in ways that are not worth
# copying (`3[1:] is callable` is True), so only these are subscripted.
SUBSCRIPTED = ["s", "l", "msgs", "'ab'", "[1, 2]", "d", "x", "u"]
ATOMS = ["1", "0", "-2", "2.5", "'ab'", "''", "'a b '", "none", "true", "false", "[1, 2]", "[]", "{'k': 'v'}",
         "x", "s", "d", "u", "l", "msgs[0]", "msgs", "(1, 'a')", "3"]
BINARY = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
FILTERS = ["length", "trim", "upper", "lower", "title", "capitalize", "list", "first", "last", "string", "int",
           "float", "tojson", "join(',')", "default('D')", "sort", "unique | list", "reverse | list",
           "items | list", "dictsort", "abs", "round", "safe", "e", "select | list", "map('string') | list",
           "indent(2)", "wordcount", "sum", "max", "min", "batch(1) | list", "replace('a', 'z')", "count",
           "selectattr('role') | list", "map(attribute='role') | list", "tojson(indent=1)"]
TESTS = ["defined", "none", "string", "mapping", "iterable", "sequence", "number", "integer", "float", "boolean",
         "true", "false", "odd", "even", "callable", "lower", "upper"]
METHODS = ["strip()", "split()", "split('a')", "upper()", "startswith('a')", "endswith('b')",
           "replace('a', 'x')", "title()", "lstrip('a')", "get('k')", "items() | list", "keys() | list",
           "values() | list", "format(1)", "count('a')", "find('b')"]
VALUES = ["x", "s", "l", "msgs", "d", "i", "m.role", "m['content']", "loop.index", "ns.n", "u", "k", "v"]
CONDS = ["loop.first", "loop.last", "i > 1", "m.role == 'user'", "x is defined", "m.content is string", "ns.n > 2",
         "v is none", "not loop.last", "s.startswith('H')"]


def expression(r, depth=0):
    p = r.random()
    if depth > 2 or p < 0.3:
        return r.choice(ATOMS)
    if p < 0.5:
        return f"({expression(r, depth + 1)} {r.choice(BINARY)} {expression(r, depth + 1)})"
    if p < 0.65:
        return f"({expression(r, depth + 1)} | {r.choice(FILTERS)})"
    if p < 0.75:
        return f"({expression(r, depth + 1)} is {r.choice(['', 'not '])}{r.choice(TESTS)})"
    if p < 0.85:
        return f"{r.choice(ATOMS)}.{r.choice(METHODS)}"
    if p < 0.9:
        return f"({expression(r, depth + 1)} if {expression(r, depth + 1)} else {expression(r, depth + 1)})"
    if p < 0.95:
        return r.choice(SUBSCRIPTED) + "[" + r.choice(["0", "-1", "1:", "::-1", "'k'", ":1"]) + "]"
    return f"(not {expression(r, depth + 1)})"


def statement(r, depth=0):
    p = r.random()
    ws = lambda: r.choice(["", "-"])  # noqa: E731
    nl = lambda: r.choice(["", "\n", "\n  ", "  ", " \n"])  # noqa: E731
    if depth > 3 or p < 0.25:
        return nl() + r.choice(["txt", "{{ " + r.choice(VALUES) + " }}", "{{- " + r.choice(VALUES) + " -}}",
                                "{# c #}"]) + nl()
    if p < 0.45:
        return f"{nl()}{{%{ws()} for m in msgs %}}{nl()}{body(r, depth + 1)}{{%{ws()} endfor {ws()}%}}{nl()}"
    if p < 0.55:
        return f"{nl()}{{%{ws()} for i in l if i != 2 %}}{body(r, depth + 1)}{{% else %}}E{{% endfor %}}{nl()}"
    if p < 0.6:
        return f"{{% for k, v in d.items() %}}{body(r, depth + 1)}{{% endfor %}}"
    if p < 0.75:
        return (f"{nl()}{{%{ws()} if {r.choice(CONDS)} {ws()}%}}{nl()}{body(r, depth + 1)}"
                f"{{% elif {r.choice(CONDS)} %}}{body(r, depth + 1)}{{% else %}}{body(r, depth + 1)}{{% endif %}}{nl()}")
    if p < 0.85:
        return f"{{% set ns.n = ns.n + 1 %}}{nl()}"
    if p < 0.9:
        return f"{{% set x = {r.choice(VALUES)} %}}"
    if p < 0.95:
        return "{% if ns.n > 3 %}{% break %}{% endif %}" if depth > 0 else "{{ ns.n }}"
    return f"{{% set blk %}}{body(r, depth + 1)}{{% endset %}}{{{{ blk | trim }}}}"


def body(r, depth):
    return "".join(statement(r, depth) for _ in range(r.randint(1, 3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--count", type=int, default=1500)
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    env = rr.make_env()
    cases, expected = [], {}
    for seed in args.seeds:
        r = random.Random(seed)
        for i in range(args.count):
            for kind in ("expr", "stmt"):
                source = ("{{ " + expression(r) + " }}" if kind == "expr"
                          else "{% set ns = namespace(n=0) %}" + body(r, 0) + "{{ ns.n }}")
                cid = f"{kind}-{seed}-{i}"
                path = os.path.join(args.workdir, cid + ".jinja")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(source)
                cases.append({"id": cid, "template": path, "context": CONTEXT})
                expected[cid] = (source, rr.reference(env, source, copy.deepcopy(CONTEXT)))
    cases_path = os.path.join(args.workdir, "cases.json")
    results_path = os.path.join(args.workdir, "results.json")
    with open(cases_path, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f)
    subprocess.run([args.tool, cases_path, results_path], check=True, timeout=240)
    with open(results_path, encoding="utf-8") as f:
        got = json.load(f)

    bad = []
    for cid, (source, exp) in expected.items():
        act = got[cid]
        same = (exp["ok"] and act["ok"] and exp["output"] == act["output"]) or (not exp["ok"] and not act["ok"])
        if not same:
            bad.append((len(source), cid, source, exp, act))
    for _, cid, source, exp, act in sorted(bad)[:10]:
        print(f"MISMATCH {cid}: {source!r}\n  jinja2 {str(exp)[:300]}\n  ours   {str(act)[:300]}")
    print(f"{len(cases) - len(bad)}/{len(cases)} random templates render as Jinja2 {rr.jinja2.__version__} renders them")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
