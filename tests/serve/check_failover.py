#!/usr/bin/env python3
"""Two `skainet serve` replicas behind HAProxy (docs/deploy.md's configuration): one is killed while
clients are sending completions, and every request started after the kill must still be answered.

    check_failover.py SKAINET MODEL

The replicas start with --port 0 (each prints its port); HAProxy (Debian's, installed by
scripts/setup.sh) runs in the foreground on a free port with active /health checks, retries and
redispatch. A missing haproxy fails the test, never skips it. Everything started is killed at the end.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BODY = json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}).encode()


def start_replica(skainet, model):
    proc = subprocess.Popen([skainet, "serve", "-m", model, "--port", "0", "--slots", "1", "-t", "1", "--ctx", "128"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    for line in proc.stderr:
        m = re.search(r"on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep draining
            return proc, int(m.group(1))
        if time.time() > deadline:
            break
    proc.kill()
    sys.exit(f"a replica did not start: exit {proc.wait()}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def complete(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=BODY,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return repr(e)


def main():
    skainet, model = sys.argv[1], sys.argv[2]
    procs = []
    try:
        a, port_a = start_replica(skainet, model)
        procs.append(a)
        b, port_b = start_replica(skainet, model)
        procs.append(b)
        front = free_port()
        work = tempfile.mkdtemp(prefix="skainet-failover-")
        cfg = os.path.join(work, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(f"""defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch
  retry-on conn-failure empty-response response-timeout
frontend llm
  bind 127.0.0.1:{front}
  default_backend skainet
backend skainet
  balance leastconn
  option httpchk GET /health
  http-check expect status 200
  default-server check inter 500ms fall 2 rise 2
  server a 127.0.0.1:{port_a}
  server b 127.0.0.1:{port_b}
""")
        try:
            haproxy = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
        except FileNotFoundError:
            sys.exit("haproxy is missing (scripts/setup.sh installs it)")
        procs.append(haproxy)
        deadline = time.time() + 30
        while complete(front) != 200:
            if time.time() > deadline or haproxy.poll() is not None:
                sys.exit("no answer through haproxy: " + (haproxy.stderr.read() if haproxy.poll() is not None else ""))
            time.sleep(0.1)

        # Four clients in a loop; replica a is killed once 12 requests were answered.
        results, lock, stop = [], threading.Lock(), threading.Event()
        killed_at = [None]

        def client():
            while not stop.is_set():
                started = time.time()
                status = complete(front)
                with lock:
                    results.append((started, status))

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        while len(results) < 12 and time.time() < deadline + 60:
            time.sleep(0.05)
        a.send_signal(signal.SIGKILL)
        a.wait()
        killed_at[0] = time.time()
        time.sleep(4)
        stop.set()
        for t in threads:
            t.join()

        before = [s for t, s in results if t < killed_at[0]]
        after = [s for t, s in results if t >= killed_at[0]]
        print(f"requests before the kill: {len(before)} ({before.count(200)} answered); "
              f"after: {len(after)} ({after.count(200)} answered)")
        bad = [s for s in after if s != 200]
        if len(after) < 10 or bad:
            sys.exit(f"after the kill: {len(after)} requests, not answered: {bad[:5]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
