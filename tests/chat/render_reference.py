#!/usr/bin/env python3
"""Renders every chat template in ../shared/models/templates for every conversation in
conversations.json with Python's Jinja2, configured as HuggingFace transformers' apply_chat_template
configures it, renders the same cases with skainet::chat (the chat_render_cases tool), and compares
them byte for byte. A case where Jinja2 raises must raise in ours too.

HuggingFace's environment (transformers/utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, jinja2.ext.loopcontrols]), the `tojson` filter replaced by
json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False), and the globals
raise_exception (raises TemplateError) and strftime_now (datetime.now().strftime). Here strftime_now
is pinned to 2026-01-15 10:30:00 so the output is reproducible; AssistantTracker's
{% generation %} block renders its body unchanged, as it does outside of assistant-mask tracking.

  build/venv/bin/python tests/chat/render_reference.py --tool build/h-chat/tests/chat_render_cases \
      --templates ../shared/models/templates --workdir /tmp/chat_ref [--only NAME] [--diff]
"""
import argparse
import copy
import datetime
import json
import os
import subprocess
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # the test must fail, not skip, without its reference
    print(f"FAIL: Jinja2 is not installed in this Python ({sys.executable}): {e}; run scripts/setup.sh")
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED_NOW = datetime.datetime(2026, 1, 15, 10, 30, 0)

# (template file, conversation) -> why ours differs from Jinja2. Kept empty while every case matches;
# an entry here that starts matching fails the test too, so the list cannot go stale.
KNOWN_FAILURES = {
}


class GenerationBlock(jinja2.ext.Extension):
    """HuggingFace's AssistantTracker parses {% generation %}...{% endgeneration %}; outside of
    return_assistant_tokens_mask it only renders the body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def reference(env, source, context, cache={}):
    try:
        if source not in cache:
            cache[source] = env.from_string(source)
        tmpl = cache[source]
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    try:
        return {"ok": True, "output": tmpl.render(**context)}
    except RecursionError as e:
        return {"ok": False, "error": f"RecursionError: {e}"}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def first_difference(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--templates", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", help="substring of the template file names to run")
    ap.add_argument("--diff", action="store_true", help="print the differing text of each mismatch")
    args = ap.parse_args()

    names = sorted(f for f in os.listdir(args.templates) if f.endswith(".jinja"))
    if args.only:
        names = [n for n in names if args.only in n]
    if not names:
        print(f"FAIL: no templates in {args.templates}")
        return 1
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)["conversations"]

    env = make_env()
    cases, expected = [], {}
    for name in names:
        path = os.path.join(args.templates, name)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for conv in convs:
            ctx = dict(conv["context"], bos_token="<s>", eos_token="</s>")
            cid = f"{name}::{conv['name']}"
            cases.append({"id": cid, "template": path, "context": ctx})
            # A copy: Jinja2 itself can change what it is given (`indent` on a list appends to it).
            expected[cid] = reference(env, source, copy.deepcopy(ctx))

    os.makedirs(args.workdir, exist_ok=True)
    cases_path = os.path.join(args.workdir, "cases.json")
    results_path = os.path.join(args.workdir, "results.json")
    with open(cases_path, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False)
    subprocess.run([args.tool, cases_path, results_path], check=True, timeout=240)
    with open(results_path, encoding="utf-8") as f:
        got = json.load(f)

    matched, refused_both, bad, stale = 0, 0, [], []
    per_template = {}
    for c in cases:
        cid = c["id"]
        exp, act = expected[cid], got.get(cid, {"ok": False, "error": "missing result"})
        if exp["ok"] and act["ok"]:
            ok = exp["output"] == act["output"]
        else:
            ok = exp["ok"] == act["ok"]
        tname, cname = cid.split("::")
        per_template.setdefault(tname, [0, 0])
        per_template[tname][1] += 1
        known = (tname, cname) in KNOWN_FAILURES
        if ok:
            matched += 1
            per_template[tname][0] += 1
            refused_both += 0 if exp["ok"] else 1
            if known:
                stale.append(cid)
            continue
        if known:
            continue
        bad.append(cid)
        if exp["ok"] and act["ok"]:
            i = first_difference(exp["output"], act["output"])
            print(f"MISMATCH {cid}: first difference at byte {i}: "
                  f"jinja2 {exp['output'][max(0, i - 40):i + 40]!r} vs ours {act['output'][max(0, i - 40):i + 40]!r}")
        else:
            print(f"MISMATCH {cid}: jinja2 {'renders' if exp['ok'] else 'raises ' + exp['error'][:200]!r}; "
                  f"ours {'renders' if act['ok'] else 'raises ' + act['error'][:300]!r}")
        if args.diff and exp["ok"] and act["ok"]:
            print("--- jinja2\n" + exp["output"] + "\n--- ours\n" + act["output"] + "\n---")

    full = sum(1 for t, (m, n) in per_template.items() if m == n)
    print(f"{matched}/{len(cases)} (template, conversation) cases match Jinja2 {jinja2.__version__} "
          f"({refused_both} of them refused by both); {full}/{len(per_template)} templates match on every "
          f"conversation; {len(KNOWN_FAILURES)} known failures listed")
    for cid in stale:
        print(f"STALE: {cid} is listed in KNOWN_FAILURES but now matches; remove it")
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
