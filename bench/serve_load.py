"""A bounded load test of `skainet serve` on loopback (issue 24; figures in docs/reliability.md).

    build/venv/bin/python bench/serve_load.py [--seconds 60] [--clients 64] [--slow 64] [--slots 2]
        [--queue 16] [--ctx 512] [--threads 2] [--model PATH] [--skainet PATH]

Starts the built server itself (`--port 0`; the port is read from its stderr), warms it up, then for
--seconds runs at once:

  * --clients clients, each a loop of request, read the whole answer, repeat, on a keep-alive
    connection: /v1/completions and /v1/chat/completions, streamed and not (a quarter each),
    max_tokens 16-64 with ignore_eos. Every status and error type is counted; a 503 "server_busy"
    (the queue is full) is allowed, and its client waits --busy-backoff seconds before the next try.
  * --slow slow or silent connections, a quarter of each kind: *silent* (connect, send nothing, wait
    for the server to close; reconnect), *slowloris* (a request's headers one byte every ~1 s),
    *slow body* (whole headers with Content-Length, then the body one byte every ~1 s) and *slow
    reader* (a small receive buffer, a streamed request for many tokens, the answer left unread for
    ~20 s, then drained). How long the server let each live, and what it answered, is counted.
  * a prober, in its own process: GET /health on a fresh connection every ~50 ms; its latency
    (connect to the end of the answer) is the figure the issue bounds.
  * the server's VmRSS and VmHWM (/proc/PID/status) sampled every 100 ms.

Then it checks that the server is alive and answers /health, takes the RSS after the load, stops it
with SIGTERM and times the exit. Exits 1 when a target is missed: /health p99 >= 100 ms or a failed
probe, the server gone (a crash), a 5xx other than 503 server_busy (or an error event in a stream),
RSS growth above the per-connection bound (docs/reliability.md), an exit that takes over 15 s or
fails. The model defaults to a synthetic llama (58.5M parameters, Q8_0) made under build/bench/ by
`skainet synth` on first use.
"""
import argparse
import collections
import http.client
import json
import math
import multiprocessing as mp
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"
KIB, MIB = 1 << 10, 1 << 20
# src/serve/http.hpp HttpLimits
CONNECTION_MEMORY = 64 * KIB
STREAM_BUFFER = 1 * MIB
HEALTH_P99_MS = 100.0
SLOW_BODY_LENGTH = 4096
PROMPTS = ["Once upon a time", "The cat sat on the mat and", "Lily wanted to play with her friend",
           "In a small village by the sea there lived"]


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100.0 * len(s)) - 1))]  # nearest rank


def mem_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:", "Threads:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0]) * (KIB if k != "Threads" else 1)
    except OSError:
        pass
    return out


# ---------------------------------------------------------------------------------------------------
# The prober (own process, so the clients' Python does not delay its clock).

def probe_once(port, timeout=10.0):
    t0 = time.perf_counter()
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                m = re.search(rb"content-length:\s*(\d+)", head, re.I)
                if m and len(body) >= int(m.group(1)):
                    break
    finally:
        s.close()
    dt = (time.perf_counter() - t0) * 1000.0
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return dt, status, data


def prober(port, seconds, interval, out):
    start = time.perf_counter()
    samples, failures = [], collections.Counter()
    k = 0
    while True:
        now = time.perf_counter()
        if now - start >= seconds:
            break
        try:
            dt, status, data = probe_once(port)
            if status == 200:
                samples.append((now - start, dt))
            else:
                failures[f"status {status}"] += 1
        except OSError as e:
            failures[type(e).__name__] += 1
        k += 1
        nxt = start + k * interval
        now = time.perf_counter()
        if nxt < now:  # late: do not burst to catch up
            k = int((now - start) / interval) + 1
            nxt = start + k * interval
        time.sleep(max(0.0, nxt - now))
    out.put({"samples": samples, "failures": dict(failures)})


# ---------------------------------------------------------------------------------------------------
# The clients (own process, 64 threads).

def client_loop(i, port, deadline, backoff, rec, lock):
    kind = ("completions", "completions+stream", "chat", "chat+stream")[i % 4]
    rng = random.Random(1000 + i)
    conn = None
    local = collections.Counter()
    latencies, tokens = [], 0
    while time.time() < deadline:
        stream = kind.endswith("+stream")
        body = {"max_tokens": rng.randint(16, 64), "ignore_eos": True, "stream": stream}
        if kind.startswith("chat"):
            path = "/v1/chat/completions"
            body["messages"] = [{"role": "system", "content": "You tell short stories."},
                                {"role": "user", "content": rng.choice(PROMPTS)}]
        else:
            path = "/v1/completions"
            body["prompt"] = rng.choice(PROMPTS)
        if conn is None:
            conn = http.client.HTTPConnection(HOST, port, timeout=120)
        t0 = time.perf_counter()
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            status = r.status
            if status == 200 and stream:
                done, err = False, None
                for raw in r:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data: "):
                        continue
                    payload = line[6:]
                    if payload == "[DONE]":
                        done = True
                        continue
                    ev = json.loads(payload)
                    if "error" in ev:
                        err = ev["error"].get("type", "?")
                    elif ev.get("choices") and ev["choices"][0].get("finish_reason") is None:
                        tokens += 1
                r.read()
                if err:
                    local[f"{kind} 200 stream error event {err}"] += 1
                elif not done:
                    local[f"{kind} 200 stream without [DONE]"] += 1
                else:
                    local[f"{kind} 200"] += 1
                    latencies.append(time.perf_counter() - t0)
            else:
                data = r.read()
                if status == 200:
                    tokens += json.loads(data)["usage"]["completion_tokens"]
                    local[f"{kind} 200"] += 1
                    latencies.append(time.perf_counter() - t0)
                else:
                    try:
                        etype = json.loads(data)["error"]["type"]
                    except (ValueError, KeyError, TypeError):
                        etype = data[:60].decode("utf-8", "replace")
                    local[f"{kind} {status} {etype}"] += 1
                    if r.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                    if status == 503 and backoff > 0:
                        time.sleep(backoff)
        except (OSError, http.client.HTTPException, ValueError) as e:
            local[f"{kind} transport {type(e).__name__}"] += 1
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.05)
    if conn is not None:
        conn.close()
    with lock:
        rec["counts"].update(local)
        rec["latencies"].extend(latencies)
        rec["tokens"] += tokens


def clients_main(port, n, seconds, backoff, out):
    deadline = time.time() + seconds
    rec = {"counts": collections.Counter(), "latencies": [], "tokens": 0}
    lock = threading.Lock()
    threads = [threading.Thread(target=client_loop, args=(i, port, deadline, backoff, rec, lock), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put({"counts": dict(rec["counts"]), "latencies": rec["latencies"], "tokens": rec["tokens"]})


# ---------------------------------------------------------------------------------------------------
# The slow and silent connections (threads of the main process: they mostly sleep).

class SlowRecord:
    def __init__(self):
        self.lock = threading.Lock()
        self.events = collections.defaultdict(list)  # kind -> [(outcome, seconds)]
        self.open_at_end = collections.Counter()
        self.busy_retries = collections.Counter()
        self.read_bytes = collections.defaultdict(list)

    def add(self, kind, outcome, seconds):
        with self.lock:
            self.events[kind].append((outcome, seconds))


def first_line(data):
    return data.split(b"\r\n", 1)[0].decode("latin-1")[:40] if data else ""


def wait_closed(s, until):
    """Reads until EOF or `until`; (closed, bytes received)."""
    data = b""
    while time.time() < until:
        r, _, _ = select.select([s], [], [], min(0.5, max(0.0, until - time.time())))
        if not r:
            continue
        try:
            chunk = s.recv(65536)
        except OSError:
            return True, data
        if not chunk:
            return True, data
        data += chunk
    return False, data


def trickle(s, payload, deadline, rng):
    """Sends `payload` one byte every ~1 s; (closed by the server, bytes it answered)."""
    received = b""
    for b in payload:
        if time.time() >= deadline:
            return False, received
        r, _, _ = select.select([s], [], [], 0)
        if r:
            try:
                chunk = s.recv(65536)
            except OSError:
                return True, received
            if not chunk:
                return True, received
            received += chunk
        try:
            s.send(bytes([b]))
        except OSError:
            return True, received
        time.sleep(0.8 + 0.4 * rng.random())
    return wait_closed(s, deadline)[0], received


def slow_loop(kind, i, port, deadline, rec):
    rng = random.Random(2000 + i)
    time.sleep(rng.random() * 2.0)  # staggered
    while time.time() < deadline - 0.5:
        t0 = time.time()
        s = socket.socket()
        if kind == "slow reader":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        try:
            s.connect((HOST, port))
        except OSError as e:
            rec.add(kind, f"connect {type(e).__name__}", 0.0)
            time.sleep(1.0)
            continue
        try:
            if kind == "silent":
                closed, data = wait_closed(s, deadline)
                outcome = f"closed by server{' with ' + first_line(data) if data else ', no answer'}"
            elif kind == "slowloris":
                payload = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"
                closed, data = trickle(s, payload, deadline, rng)
                outcome = f"closed by server{' with ' + first_line(data) if data else ', no answer'}"
            elif kind == "slow body":
                head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {SLOW_BODY_LENGTH}\r\n\r\n").encode()
                s.sendall(head)
                body = b'{"prompt": "' + b"a" * (SLOW_BODY_LENGTH - 14) + b'"}'
                closed, data = trickle(s, body, deadline, rng)
                outcome = f"closed by server{' with ' + first_line(data) if data else ', no answer'}"
            else:  # slow reader
                body = json.dumps({"prompt": rng.choice(PROMPTS), "max_tokens": 400, "ignore_eos": True,
                                   "stream": True}).encode()
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                # Peek (nothing is taken from the socket) for the status line: a 503 server_busy means the
                # queue was full, so try again like a client would; anything else is held unread.
                head = b""
                while time.time() < deadline and b"\r\n" not in head:
                    r, _, _ = select.select([s], [], [], 0.5)
                    if r:
                        head = s.recv(64, socket.MSG_PEEK)
                        if not head:
                            break
                if head.startswith(b"HTTP/1.1 503"):
                    with rec.lock:
                        rec.busy_retries[kind] += 1
                    s.close()
                    time.sleep(0.05)
                    continue
                hold_until = min(deadline, time.time() + 20.0)
                p = select.poll()
                p.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
                hup_at = None
                while time.time() < hold_until:
                    if p.poll(1000) and hup_at is None:
                        hup_at = time.time() - t0
                # Now read what is there (up to 5 s more) and see how the answer ended.
                closed, data = wait_closed(s, time.time() + 5.0)
                if not data.startswith(b"HTTP/1.1 200"):
                    outcome = f"answered {first_line(data) or 'nothing'}"
                elif b"data: [DONE]" in data:
                    outcome = "whole answer waited ([DONE])"
                elif b'"error"' in data:
                    m = re.search(rb'"type":"([a-z_]+)"', data)
                    outcome = f"answer with error event {m.group(1).decode() if m else '?'}"
                else:
                    outcome = "answer cut off (no [DONE])"
                # A FIN queued behind unread bytes cannot reach us, so a hang-up is seen only when the
                # server reset the connection or everything before it was delivered.
                with rec.lock:
                    rec.read_bytes[kind].append(len(data))
                outcome += "; hang-up seen while unread" if hup_at is not None else ""
                outcome += "" if closed else "; still open 5 s after reading"
                closed = True  # one attempt per connection
        except OSError as e:
            closed, outcome = True, f"error {type(e).__name__}"
        finally:
            s.close()
        dt = time.time() - t0
        if closed and (time.time() < deadline or kind == "slow reader"):
            rec.add(kind, outcome, dt)
        else:
            with rec.lock:
                rec.open_at_end[kind] += 1


# ---------------------------------------------------------------------------------------------------

def http_get(port, path, timeout=10):
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def http_post(port, path, body, timeout=120):
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def default_model(skainet):
    path = os.path.join(ROOT, "build", "bench", "serve_load_llama_q8.gguf")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cmd = [skainet, "synth", "--preset", "stories15M", "--dim", "512", "--layers", "8", "--heads", "8",
               "--ffn", "1408", "--ctx", "512", "--type", "Q8_0", "--bigram", "--threads", "2", path]
        print("serve_load: making the model:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--slow", type=int, default=64)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--queue", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=None, help="GGUF (default: a synthetic llama made under build/bench/)")
    ap.add_argument("--skainet", default=os.path.join(ROOT, "build", "release", "skainet"))
    ap.add_argument("--probe-interval", type=float, default=0.05)
    ap.add_argument("--busy-backoff", type=float, default=0.05, help="a client's pause after a 503 (s)")
    args = ap.parse_args()

    model = args.model or default_model(args.skainet)
    cmd = [args.skainet, "serve", "-m", model, "--port", "0", "--slots", str(args.slots), "--queue",
           str(args.queue), "--ctx", str(args.ctx), "-t", str(args.threads)]
    print("serve_load:", " ".join(cmd), flush=True)
    t_launch = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, port_box, ready = [], [], threading.Event()

    def drain():
        for line in proc.stderr:
            lines.append((time.time() - t_launch, line.rstrip("\n")))
            m = re.search(r"on http://[^:]+:(\d+)", line)
            if m and not port_box:
                port_box.append(int(m.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(120) or not port_box:
        proc.kill()
        sys.exit("serve_load: the server did not start:\n" + "\n".join(l for _, l in lines))
    port = port_box[0]
    plan = re.search(r"plan resident ([\d.]+) MiB", "\n".join(l for _, l in lines))
    plan_mib = float(plan.group(1)) if plan else float("nan")

    # Warm-up: as many requests at once as the server admits (--slots + --queue), each kind the load
    # sends (the completions and chat APIs, streamed and not, the slow readers' 400 tokens), so every
    # slot has generated (weights paged in, slabs and KV touched) and every worker thread has run once
    # (its stack and malloc arena): the baseline is the server in use, the growth what the load adds.
    warm = []

    def warm_one(k):
        body = {"max_tokens": 400 if k < args.slots else 32, "ignore_eos": True, "stream": k % 2 == 1}
        if k % 4 >= 2:
            path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": PROMPTS[k % 4]}]
        else:
            path, body["prompt"] = "/v1/completions", PROMPTS[k % 4]
        warm.append(http_post(port, path, body)[0])

    ws = [threading.Thread(target=warm_one, args=(k,)) for k in range(args.slots + args.queue)]
    for t in ws:
        t.start()
    for t in ws:
        t.join()
    time.sleep(1.0)
    base = mem_status(proc.pid)

    ctx = mp.get_context("spawn")
    probe_q, client_q = ctx.Queue(), ctx.Queue()
    probe_p = ctx.Process(target=prober, args=(port, args.seconds, args.probe_interval, probe_q))
    client_p = ctx.Process(target=clients_main, args=(port, args.clients, args.seconds, args.busy_backoff, client_q))

    rss = []  # (t, VmRSS, VmHWM, Threads)
    sampling = threading.Event()
    crashed_at = []

    def sampler():
        t0 = time.time()
        while not sampling.is_set():
            m = mem_status(proc.pid)
            if proc.poll() is not None and not crashed_at:
                crashed_at.append(time.time() - t0)
            if m:
                rss.append((time.time() - t0, m.get("VmRSS", 0), m.get("VmHWM", 0), m.get("Threads", 0)))
            time.sleep(0.1)

    slow_rec = SlowRecord()
    kinds = ["silent", "slowloris", "slow body", "slow reader"]
    load_start = time.time()
    deadline = load_start + args.seconds
    sampler_t = threading.Thread(target=sampler, daemon=True)
    sampler_t.start()
    probe_p.start()
    client_p.start()
    slow_threads = [threading.Thread(target=slow_loop, args=(kinds[i % 4], i, port, deadline, slow_rec), daemon=True)
                    for i in range(args.slow)]
    for t in slow_threads:
        t.start()
    n_kind = collections.Counter(kinds[i % 4] for i in range(args.slow))

    probe = probe_q.get(timeout=args.seconds + 120)
    clients = client_q.get(timeout=args.seconds + 300)
    probe_p.join()
    client_p.join()
    for t in slow_threads:
        t.join(30)
    load_end = time.time()
    time.sleep(2.0)
    sampling.set()
    sampler_t.join()

    alive = proc.poll() is None
    health_after = None
    try:
        st, data = http_get(port, "/health")
        health_after = (st, json.loads(data))
    except (OSError, ValueError) as e:
        health_after = (0, type(e).__name__)
    after = mem_status(proc.pid)

    # SIGTERM and the time to exit.
    t_term = time.time()
    exit_code, exit_s = None, None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            exit_code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            exit_code = "killed after 30 s"
        exit_s = time.time() - t_term
    else:
        exit_code = proc.returncode
    time.sleep(0.2)

    # ---- summary ---------------------------------------------------------------------------------
    lat = [d for _, d in probe["samples"]]
    p50, p99, pmax = percentile(lat, 50), percentile(lat, 99), max(lat) if lat else float("nan")
    worst = sorted(probe["samples"], key=lambda x: -x[1])[:5]
    counts = collections.Counter(clients["counts"])
    total_req = sum(counts.values())
    ok = sum(v for k, v in counts.items() if k.endswith(" 200"))
    busy = sum(v for k, v in counts.items() if " 503 server_busy" in k)
    bad5xx = {k: v for k, v in counts.items()
              if (re.search(r" 5\d\d ", k) and " 503 server_busy" not in k) or "error event" in k}
    other = {k: v for k, v in counts.items() if not k.endswith(" 200") and " 503 server_busy" not in k
             and k not in bad5xx}
    peak_rss = max((r[1] for r in rss), default=0)
    peak_hwm = max((r[2] for r in rss), default=0)
    peak_threads = max((r[3] for r in rss), default=0)
    conns = args.clients + args.slow + 1
    bound = (conns * CONNECTION_MEMORY + (n_kind["slow body"] * SLOW_BODY_LENGTH + args.clients * KIB)
             + args.slots * STREAM_BUFFER + (args.slots + args.queue) * CONNECTION_MEMORY)
    growth = peak_hwm - base.get("VmHWM", 0)
    req_lat = clients["latencies"]

    def mib(x):
        return f"{x / MIB:.1f} MiB"

    rows = [
        ("model", f"{os.path.relpath(model, ROOT) if model.startswith(ROOT) else model}"),
        ("server", f"--slots {args.slots} --queue {args.queue} --ctx {args.ctx} -t {args.threads}; plan resident {plan_mib} MiB"),
        ("load", f"{args.seconds:.0f} s: {args.clients} clients + {args.slow} slow/silent + 1 prober "
                 f"(busy back-off {args.busy_backoff * 1000:.0f} ms)"),
        ("/health probes", f"{len(lat)} ok, {sum(probe['failures'].values())} failed {probe['failures'] or ''}"),
        ("/health latency", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {pmax:.1f} ms (target p99 < {HEALTH_P99_MS:.0f} ms)"),
        ("slowest probes", ", ".join(f"{d:.0f} ms at {t:.1f} s" for t, d in worst)),
        ("client requests", f"{total_req}: {ok} answered 200, {busy} 503 server_busy, "
                            f"{sum(bad5xx.values())} other 5xx/error events, {sum(other.values())} other"),
        ("answered 200", f"{clients['tokens']} tokens; request time p50 {percentile(req_lat, 50):.2f} s, "
                         f"p99 {percentile(req_lat, 99):.2f} s, max {max(req_lat, default=float('nan')):.2f} s"),
    ]
    for k in sorted(counts):
        rows.append(("  " + k, str(counts[k])))
    for kind in kinds:
        ev = slow_rec.events.get(kind, [])
        by = collections.defaultdict(list)
        for outcome, sec in ev:
            by[outcome].append(sec)
        desc = "; ".join(f"{len(v)}x {o} after {min(v):.1f}-{max(v):.1f} s (median {percentile(v, 50):.1f})"
                         for o, v in sorted(by.items(), key=lambda x: -len(x[1])))
        rb = slow_rec.read_bytes.get(kind)
        if rb:
            desc += f"; {min(rb) / KIB:.0f}-{max(rb) / KIB:.0f} KiB read after the hold"
        busy_note = f"; 503 server_busy (retried): {slow_rec.busy_retries[kind]}" if slow_rec.busy_retries[kind] else ""
        rows.append((f"{kind} ({n_kind[kind]})",
                     (desc or "none closed") + f"; open at the end: {slow_rec.open_at_end[kind]}" + busy_note))
    rows += [
        ("RSS before load", f"VmRSS {mib(base.get('VmRSS', 0))}, VmHWM {mib(base.get('VmHWM', 0))}"),
        ("RSS during load", f"peak VmRSS {mib(peak_rss)}, VmHWM {mib(peak_hwm)} (+{mib(growth)} over the baseline's VmHWM); "
                            f"{len(rss)} samples; threads peak {peak_threads}"),
        ("RSS after load", f"VmRSS {mib(after.get('VmRSS', 0))}, VmHWM {mib(after.get('VmHWM', 0))}"),
        ("per-connection bound", f"{mib(bound)} = {conns} conns x 64 KiB + bodies + {args.slots} streams x 1 MiB "
                                 f"+ {args.slots + args.queue} admitted x 64 KiB"),
        ("server alive after load", f"{alive}; /health {health_after[0]} {health_after[1] if health_after[0] == 200 else health_after}"),
        ("crashes", str(len(crashed_at))),
        ("SIGTERM", f"exit code {exit_code} after {exit_s:.2f} s" if exit_s is not None else f"already exited ({exit_code})"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    print("| " + "what".ljust(width) + " | figure |")
    print("|" + "-" * (width + 2) + "|---|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")

    interesting = [(t, l) for t, l in lines if "serving" not in l and "warning: context" not in l
                   and "chat_template" not in l]
    patterns = collections.Counter(re.sub(r"\d+", "N", l) for _, l in interesting)
    print(f"\nserver stderr: {len(lines)} lines; by pattern (digits as N):")
    for p, n in patterns.most_common(15):
        print(f"  {n:5d}  {p[:160]}")

    failures = []
    if not lat or p99 >= HEALTH_P99_MS:
        failures.append(f"/health p99 {p99:.1f} ms >= {HEALTH_P99_MS:.0f} ms")
    if probe["failures"]:
        failures.append(f"failed probes {probe['failures']}")
    if crashed_at or not alive or (health_after or (0,))[0] != 200:
        failures.append(f"server not alive or not answering after load (crashed at {crashed_at})")
    if bad5xx:
        failures.append(f"5xx other than server_busy: {bad5xx}")
    if growth > bound:
        failures.append(f"RSS growth {mib(growth)} above the bound {mib(bound)}")
    if exit_s is None or exit_code != 0 or exit_s > 15:
        failures.append(f"SIGTERM: exit code {exit_code} after {exit_s}")
    if failures:
        print("\nserve_load: MISSED: " + "; ".join(failures))
        sys.exit(1)
    print("\nserve_load: all targets met")


if __name__ == "__main__":
    main()
