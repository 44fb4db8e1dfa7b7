"""Prefix reuse across requests: time to first token of a request sharing a long prefix with the one
before it, beside the first's (docs/serving.md).

    python3 bench/serve_prefix.py SKAINET MODEL [--slots 1 4] [--threads 2] [--prefix 400] [--rounds 5]
                                  [--between N] [--cache-ram MIB] [--llama-server PATH]

For each slot count: start `skainet serve` with that many slots, then per round send two streamed
greedy completions one after the other: the first opens with a prefix of at least --prefix tokens that
no earlier round used (its first word differs, so nothing of it is cached), the second the same prefix
with another ending. Time to first token is from sending the request to the first chunk with text. Prints
each pair, the medians, the median of the pairwise ratios (min-max) and the cached_tokens the second
reported (usage.prompt_tokens_details.cached_tokens, from the stream's usage chunk).

--between N sends N other conversations (untimed, each opening with a word of its own) between the
first and the second, so that with fewer slots than N + 1 the first's prefix is gone from every slot and
only the prompt cache (`--cache-ram`, passed to the server) can give it back. --llama-server PATH runs
the same rounds on llama.cpp's server after skainet's (the same slots, threads, per-slot context and
--cache-ram; `cached_tokens` as it reports them).
"""
import argparse
import http.client
import json
import socket
import statistics
import subprocess
import time

from serve_throughput import wait_healthy  # the same start-up wait as the throughput bench

WORDS = ("the little dog ran to the park and saw a big red ball under a tree so he barked at it and a girl "
         "named Lily came to play with him in the warm sun until the sky was dark and they went home ").split()
OPENERS = ["Lily", "Tom", "Ben", "Sue", "Max", "Anna", "Sam", "Mia", "Joe", "Zoe", "Tim", "Amy"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    return c, c.getresponse()


def first_token(port, prompt):
    """(seconds to the first chunk with text, cached_tokens, prompt_tokens) of one streamed completion."""
    body = {"prompt": prompt, "max_tokens": 4, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    c, r = request(port, body)
    ttft, usage = None, None
    for line in r:
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if ttft is None and any(ch.get("text") for ch in chunk["choices"]):
            ttft = time.perf_counter() - start
        usage = chunk.get("usage") or usage
    c.close()
    return ttft, (usage.get("prompt_tokens_details") or {}).get("cached_tokens"), usage["prompt_tokens"]


def prompt_tokens(skainet, model, prompt):
    """The prompt's token count as the server counts it (BOS included), from `skainet tokenize --ids`."""
    out = subprocess.run([skainet, "tokenize", "-m", model, "-p", prompt, "--ids"], check=True,
                         capture_output=True, text=True).stdout
    return len(json.loads(out))


def prefix_for(args, opener):
    """`opener` and the fewest words that make at least --prefix tokens (a binary search on the count)."""
    def text(n):
        return " ".join([opener] + [WORDS[i % len(WORDS)] for i in range(n)])

    def enough(n):
        return prompt_tokens(args.skainet, args.model, text(n)) >= args.prefix

    hi = 16
    while not enough(hi):
        hi *= 2
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return text(hi)


def server_command(args, engine, slots, port):
    if engine == "skainet":
        return [args.skainet, "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads),
                "--slots", str(slots), "--ctx", str(args.ctx), "--cache-ram", str(args.cache_ram)]
    # llama-server divides -c between its slots: N times the per-slot context.
    return [args.llama_server, "-m", args.model, "--port", str(port), "--host", "127.0.0.1", "-t", str(args.threads),
            "-np", str(slots), "-c", str(args.ctx * slots), "--cache-ram", str(args.cache_ram)]


def run(args, engine, slots):
    port = free_port()
    cmd = server_command(args, engine, slots, port)
    prefixes = [prefix_for(args, OPENERS[r % len(OPENERS)]) for r in range(args.rounds)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc)
        first_token(port, "Once upon a time")  # warm-up: page in the weights
        firsts, seconds, ratios = [], [], []
        for r in range(args.rounds):
            prefix = prefixes[r]
            a, a_cached, a_tokens = first_token(port, prefix + " At last the dog")
            for k in range(args.between):
                first_token(port, f"Zed{r}x{k} went to the shop to buy some bread and milk for his mum")
            b, b_cached, b_tokens = first_token(port, prefix + " Then the girl said")
            firsts.append(a)
            seconds.append(b)
            ratios.append(a / b)
            print(f"{engine} slots {slots} round {r}: first {a * 1e3:.1f} ms ({a_tokens} tokens, {a_cached} cached) | "
                  f"second {b * 1e3:.1f} ms ({b_tokens} tokens, {b_cached} cached) | {a / b:.1f}x", flush=True)
        print(f"{engine} slots {slots}: median first {statistics.median(firsts) * 1e3:.1f} ms, second "
              f"{statistics.median(seconds) * 1e3:.1f} ms, ratio {statistics.median(ratios):.1f}x "
              f"({min(ratios):.1f}-{max(ratios):.1f})", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("skainet")
    p.add_argument("model")
    p.add_argument("--slots", type=int, nargs="+", default=[1, 4])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prefix", type=int, default=400)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ctx", type=int, default=1024)
    p.add_argument("--between", type=int, default=0)
    p.add_argument("--cache-ram", type=int, default=0, help="MiB (0: no prompt cache)")
    p.add_argument("--llama-server", help="llama.cpp's llama-server, measured after skainet")
    args = p.parse_args()
    for slots in args.slots:
        for engine in ["skainet"] + (["llama-server"] if args.llama_server else []):
            run(args, engine, slots)


if __name__ == "__main__":
    main()
