"""Serving throughput, skainet serve beside llama.cpp's llama-server, interleaved (docs/serving.md).

    python3 bench/serve_throughput.py SKAINET LLAMA_SERVER MODEL [--slots 1 2 4] [--tokens 64] [--threads 2]

For each slot count N and each engine in turn: start the server with N slots and the same threads,
send N completion requests at once (greedy, `max_tokens` tokens each, end of text ignored so every
request generates them all), and report the tokens generated over all requests divided by the wall
time from the first send to the last answer, and the server's peak RSS (VmHWM) after the run.
"""
import argparse
import http.client
import json
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    if r.status != 200:
        raise RuntimeError(f"{r.status}: {data}")
    return data


def wait_healthy(port, proc, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become healthy")


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(cmd, port, slots, tokens):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc)
        body = {"prompt": "Once upon a time", "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
        post(port, "/v1/completions", dict(body, max_tokens=4))  # warm-up: page in the weights
        done = [0] * slots

        def one(i):
            done[i] = post(port, "/v1/completions", body)["usage"]["completion_tokens"]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(slots)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        return sum(done), wall, peak_rss(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("skainet")
    ap.add_argument("llama_server")
    ap.add_argument("model")
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512, help="context per slot")
    a = ap.parse_args()
    print("| engine | slots | tokens | wall s | tokens/s (sum over slots) | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for n in a.slots:
        port = 0  # filled in per engine below
        engines = [
            ("skainet serve", [a.skainet, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads),
                               "--slots", str(n), "--ctx", str(a.ctx), "--ignore-eos"]),
            # llama-server divides -c between its slots: give it N times the per-slot context.
            ("llama-server", [a.llama_server, "-m", a.model, "--port", str(port), "-t", str(a.threads),
                              "-np", str(n), "-c", str(a.ctx * n), "--host", "127.0.0.1"]),
        ]
        for name, cmd in engines:
            port = free_port()  # a fresh one per engine: the last one's may still be closing
            cmd = [port_arg if prev != "--port" else str(port) for prev, port_arg in zip([""] + cmd, cmd)]
            tokens, wall, rss = measure(cmd, port, n, a.tokens)
            print(f"| {name} | {n} | {tokens} | {wall:.1f} | {tokens / wall:.2f} | {rss / 2**20:.0f} |", flush=True)


if __name__ == "__main__":
    main()
