#!/usr/bin/env python3
"""Records and summarises the runs of bench/compare_llama_bench.sh (one JSON object per line).

  compare_summary.py record --engine E --key K --run I --rc RC [--bench-json F] [--time-v F] [--startup]
  compare_summary.py model --key K --file MODEL.gguf        (size, parameters, bytes streamed per token)
  compare_summary.py report --raw RAW.jsonl --bandwidth "threads=1 gbps=… threads=2 gbps=…" …

Medians, not means: the machine is shared, and a tenant's burst lowers single runs by tens of percent.
Ratios are taken per run index (our run i against llama.cpp's run i, which ran right after it).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time


def parse_time_v(path):
    rss = wall = None
    try:
        text = open(path).read()
    except OSError:
        return None, None
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        rss = int(m.group(1)) * 1024
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    if m:
        parts = [float(p) for p in m.group(1).split(":")]
        wall = sum(p * 60 ** (len(parts) - 1 - i) for i, p in enumerate(parts))
    return rss, wall


def cmd_record(a):
    rec = {"kind": "startup" if a.startup else "run", "engine": a.engine, "key": a.key, "run": a.run, "rc": a.rc}
    rec["rss_bytes"], rec["wall_s"] = parse_time_v(a.time_v) if a.time_v else (None, None)
    if a.bench_json:
        try:
            tests = json.load(open(a.bench_json))
        except (OSError, ValueError):
            tests = []
        for t in tests:
            ts = statistics.median(t["samples_ts"])
            if t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
                rec["pp_ts"] = ts
            elif t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
                rec["tg_ts"] = ts
    print(json.dumps(rec))


def cmd_model(a):
    rec = {"kind": "model", "key": a.key, "file": a.file, "size": os.path.getsize(a.file)}
    try:
        from gguf import GGUFReader  # build/venv (scripts/setup.sh)
        r = GGUFReader(a.file)
        tensors = {t.name: t for t in r.tensors}
        total = sum(int(t.n_bytes) for t in tensors.values())
        emb = tensors.get("token_embd.weight")
        # Decode streams every weight once per token except the embedding table (one row is read);
        # with tied embeddings the table is the output matrix and is streamed after all.
        per_token = total - (int(emb.n_bytes) if emb is not None and "output.weight" in tensors else 0)
        # A mixture of experts reads only the chosen experts' slices of each 3-D stack ("_exps"):
        # expert_used_count / expert_count of those bytes (the active weights).
        arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        experts, used = (int(r.fields[f"{arch}.{k}"].parts[-1][0]) if f"{arch}.{k}" in r.fields else 0
                         for k in ("expert_count", "expert_used_count"))
        if experts and used:
            stacks = sum(int(t.n_bytes) for n, t in tensors.items() if "_exps." in n)
            per_token -= stacks - stacks * used // experts
            rec.update(experts=experts, experts_used=used)
        rec.update(params=sum(int(t.n_elements) for t in tensors.values()), tensor_bytes=total, bytes_per_token=per_token,
                   types=sorted({t.tensor_type.name for t in tensors.values()}))
    except Exception as e:  # noqa: BLE001 - the report says what is missing
        rec["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(rec))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".1f", none="–"):
    return none if x is None else format(x, spec)


def mib(b):
    return "–" if b is None else f"{b / 2**20:.0f} MiB"


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", out)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor()


def parse_bw(s):
    return {int(t): float(g) for t, g in re.findall(r"threads=(\d+) gbps=([\d.]+)", s or "")}


def cmd_report(a):
    recs = [json.loads(l) for l in open(a.raw) if l.strip()]
    models = {r["key"]: r for r in recs if r["kind"] == "model"}
    keys = list(models)
    bw0, bw1 = parse_bw(a.bandwidth), parse_bw(a.bandwidth_after)
    bw = {t: max(bw0.get(t, 0), bw1.get(t, 0)) for t in set(bw0) | set(bw1)}
    ceiling_bw = bw.get(a.threads) or max(bw.values(), default=0)
    o = []
    o.append(f"Date {time.strftime('%Y-%m-%d %H:%M %Z')}; CPU {cpu_model()}, {os.cpu_count()} cores; threads {a.threads}; "
             f"pp{a.pp} / tg{a.tg}; {a.runs} interleaved runs per engine (process runs with -r 1, each engine warming "
             f"up in-process); peer llama.cpp {a.peer_commit[:12]}.")
    o.append("")
    o.append(f"Command: `{a.command}`")
    o.append("")
    o.append("Read bandwidth (streaming sum over 1 GiB, best of 7; before / after the runs): " +
             ", ".join(f"{t} thread{'s' if t > 1 else ''} {bw0.get(t, 0):.1f} / {bw1.get(t, 0):.1f} GB/s" for t in sorted(bw)))
    o.append("")
    o.append("| shape | type | file from | size | engine | pp t/s | tg t/s | peak RSS | startup s | runs ok |")
    o.append("|---|---|---|---:|---|---:|---:|---:|---:|---:|")
    ratio_rows = []
    for k in keys:
        m = models[k]
        shape, typ, source = k.split()
        src = {"synth": "skainet synth", "peerq": "llama-quantize"}.get(source, source)
        per = {}
        for eng in ("skainet", "llama.cpp"):
            runs = [r for r in recs if r["key"] == k and r.get("engine") == eng and r["kind"] == "run"]
            ok = [r for r in runs if r["rc"] == 0 and "tg_ts" in r]
            st = [r for r in recs if r["key"] == k and r.get("engine") == eng and r["kind"] == "startup" and r["rc"] == 0]
            per[eng] = {r["run"]: r for r in ok}
            o.append(f"| {shape} | {typ} | {src} | {mib(m['size'])} | {eng} | {fmt(med(r.get('pp_ts') for r in ok))} | "
                     f"{fmt(med(r.get('tg_ts') for r in ok), '.2f')} | {mib(med(r.get('rss_bytes') for r in ok))} | "
                     f"{fmt(med(r.get('wall_s') for r in st), '.2f')} | {len(ok)}/{len(runs)} |")
        pairs = sorted(set(per["skainet"]) & set(per["llama.cpp"]))
        rat = {}
        for t in ("pp_ts", "tg_ts"):
            xs = [per["skainet"][i][t] / per["llama.cpp"][i][t] for i in pairs
                  if per["skainet"][i].get(t) and per["llama.cpp"][i].get(t)]
            rat[t] = (statistics.median(xs), min(xs), max(xs)) if xs else None
        bpt = m.get("bytes_per_token")
        ceil = ceiling_bw * 1e9 / bpt if bpt and ceiling_bw else None
        frac = {}
        for eng in per:
            tgm = med(r.get("tg_ts") for r in per[eng].values())
            frac[eng] = tgm / ceil if tgm and ceil else None
        ratio_rows.append((shape, typ, src, rat, bpt, ceil, frac))
    o.append("")
    o.append("Ratios ours / llama.cpp (median of the per-run ratios, min–max), and decode against the read ceiling "
             f"({ceiling_bw:.1f} GB/s at {a.threads} threads ÷ weight bytes streamed per token):")
    o.append("")
    o.append("| shape | type | file from | pp ratio | tg ratio | MiB / token | ceiling tg t/s | skainet % of ceiling | llama.cpp % of ceiling |")
    o.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for shape, typ, src, rat, bpt, ceil, frac in ratio_rows:
        def r(x):
            return "–" if x is None else f"{x[0]:.3f} ({x[1]:.3f}–{x[2]:.3f})"
        pct = lambda f: "–" if f is None else f"{100 * f:.1f}%"  # noqa: E731
        o.append(f"| {shape} | {typ} | {src} | {r(rat['pp_ts'])} | {r(rat['tg_ts'])} | "
                 f"{fmt(bpt / 2**20 if bpt else None, '.0f')} | {fmt(ceil, '.1f')} | {pct(frac['skainet'])} | {pct(frac['llama.cpp'])} |")
    print("\n".join(o))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--engine", required=True)
    r.add_argument("--key", required=True)
    r.add_argument("--run", type=int, required=True)
    r.add_argument("--rc", type=int, required=True)
    r.add_argument("--bench-json")
    r.add_argument("--time-v")
    r.add_argument("--startup", action="store_true")
    m = sub.add_parser("model")
    m.add_argument("--key", required=True)
    m.add_argument("--file", required=True)
    p = sub.add_parser("report")
    p.add_argument("--raw", required=True)
    p.add_argument("--bandwidth", default="")
    p.add_argument("--bandwidth-after", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=0)
    p.add_argument("--pp", type=int, default=0)
    p.add_argument("--tg", type=int, default=0)
    p.add_argument("--command", default="")
    p.add_argument("--peer-commit", default="unknown")
    a = ap.parse_args()
    {"record": cmd_record, "model": cmd_model, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
