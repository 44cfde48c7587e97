#!/usr/bin/env python3
"""serve_throughput.py: aggregate generation throughput of `kipp serve` under concurrent clients.

The measurement of bench/server_bench.mjs for machines without Node.js (the GPU machine has
python3 only), standard library alone: starts `kipp serve` on a free loopback port, and per
concurrency level C runs C clients that each send --rounds streaming completions one after
another (each prompt made unique by a tag, so the prefix cache does not skew the levels; greedy;
the end-of-text ids biased by -100 so every request generates exactly --max-tokens, which is
checked through finish_reason "length"). One unmeasured request warms each level up. Per level:
generated tokens/s over the level's wall time, time to first token p50/p90, errors.

Usage: serve_throughput.py --kipp KIPP --model GGUF --out FILE.json [--levels 1,16,64]
       [--rounds N] [--max-tokens N] [--ctx N] [--server-arg=--backend=cuda ...]
"""

import argparse
import http.client
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

EOS_IDS = (151645, 151643)  # Qwen3's <|im_end|> and <|endoftext|>
PASSAGES = (
    "Explain how a bicycle stays upright while it is moving.",
    "Summarize the following notes: the meeting began at nine; the budget for the new library wing was "
    "approved; the committee asked for three more quotes for the roof; the opening is planned for spring.",
    "def merge_sort(xs):\n    if len(xs) <= 1:\n        return xs\n    mid = len(xs) // 2\n",
    "List ten uses of copper in everyday life and say briefly why copper is chosen for each.",
)
LISTENING = re.compile(r"kipp serve: listening on http://([^:\s]+):(\d+)")


class ServeError(Exception):
    """An error reported as one line with a non-zero exit."""


def start_server(args):
    cmd = [args.kipp, "serve", "-m", args.model, "--max-batch", str(max(args.levels)),
           "--max-queue", str(max(64, 2 * max(args.levels))), "--ctx", str(args.ctx),
           *args.server_arg, "--host", "127.0.0.1", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    deadline = time.monotonic() + args.start_timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        m = LISTENING.search(line)
        if m:
            # Keep draining the server's output so it never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, m.group(1), int(m.group(2)), cmd
    proc.kill()
    raise ServeError(f"kipp serve did not start listening: {' | '.join(lines[-5:])}")


def stream_one(host, port, model, prompt, max_tokens):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True},
                       "logit_bias": {str(i): -100 for i in EOS_IDS}})
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=300)
    try:
        conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        res = conn.getresponse()
        if res.status != 200:
            raise ServeError(f"HTTP {res.status}: {res.read()[:300]!r}")
        ttft = tokens = finish = None
        done = False
        for raw in res:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                continue
            j = json.loads(data)
            if j.get("error"):
                raise ServeError(f"error event: {j['error']}")
            for c in j.get("choices") or []:
                if ttft is None and c.get("text"):
                    ttft = time.monotonic() - t0
                if c.get("finish_reason"):
                    finish = c["finish_reason"]
            if j.get("usage"):
                tokens = j["usage"].get("completion_tokens")
        if not done:
            raise ServeError("stream ended without [DONE]")
        return {"ttft_s": ttft, "total_s": time.monotonic() - t0, "tokens": tokens, "finish": finish}
    finally:
        conn.close()


def pct(sorted_values, p):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, int(p * len(sorted_values) + 0.999999) - 1))]


def run_level(host, port, model, c, level, args):
    stream_one(host, port, model, f"[warmup {c}] {PASSAGES[0]}", args.max_tokens)
    results, errors = [], []
    lock = threading.Lock()

    def client(k):
        for r in range(args.rounds):
            prompt = f"[L{level} C{k} R{r}] {PASSAGES[(k * args.rounds + r) % len(PASSAGES)]}"
            try:
                out = stream_one(host, port, model, prompt, args.max_tokens)
                with lock:
                    results.append(out)
            except (ServeError, OSError, ValueError) as e:
                with lock:
                    errors.append(str(e)[:300])

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    tokens = sum(r["tokens"] or 0 for r in results)
    ttfts = sorted(r["ttft_s"] for r in results if r["ttft_s"] is not None)
    return {"concurrency": c, "requests": len(results), "errors": len(errors), "error_examples": errors[:3],
            "finish_length": sum(r["finish"] == "length" for r in results), "generated_tokens": tokens,
            "wall_s": wall, "tokens_per_s": tokens / wall if wall > 0 else None,
            "ttft_s": {"p50": pct(ttfts, 0.5), "p90": pct(ttfts, 0.9), "max": ttfts[-1] if ttfts else None}}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="serve_throughput.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--kipp", required=True, help="the kipp program")
    p.add_argument("--model", required=True, help="GGUF to serve")
    p.add_argument("--out", required=True, help="result JSON")
    p.add_argument("--levels", default="1,16,64", help="concurrency levels, comma-separated (default 1,16,64)")
    p.add_argument("--rounds", type=int, default=2, help="requests per client per level (default 2)")
    p.add_argument("--max-tokens", type=int, default=64, help="generated tokens per request (default 64)")
    p.add_argument("--ctx", type=int, default=1024, help="kipp serve --ctx (default 1024)")
    p.add_argument("--start-timeout", type=float, default=120, help="seconds to wait for the server (default 120)")
    p.add_argument("--server-arg", action="append", default=[], help="an extra kipp serve argument (repeatable)")
    args = p.parse_args(argv)
    try:
        args.levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        raise ServeError(f"--levels: '{args.levels}' is not a comma-separated list of integers")
    if min(args.levels) < 1 or args.rounds < 1 or args.max_tokens < 1:
        raise ServeError("--levels, --rounds and --max-tokens need positive integers")
    return args


def main(argv=None):
    try:
        args = parse_args(argv)
        proc, host, port, cmd = start_server(args)
    except (ServeError, OSError) as e:
        print(f"serve_throughput: error: {e}", file=sys.stderr)
        return 1
    model = Path(args.model).stem
    doc = {"kind": "serve_throughput", "model": Path(args.model).name, "max_tokens": args.max_tokens,
           "rounds": args.rounds, "server": " ".join([Path(cmd[0]).name] + cmd[1:]),
           "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}, "levels": []}
    failed = False
    try:
        for i, c in enumerate(args.levels):
            lv = run_level(host, port, model, c, i, args)
            doc["levels"].append(lv)
            failed |= lv["errors"] > 0 or lv["finish_length"] != lv["requests"]
            print(f"concurrency {c:4}: {lv['requests']} requests, {lv['generated_tokens']} tokens, "
                  f"{lv['tokens_per_s']:.1f} tokens/s, TTFT p50 {lv['ttft_s']['p50']}, "
                  f"finish=length {lv['finish_length']}/{lv['requests']}, errors {lv['errors']}", flush=True)
    except (ServeError, OSError, ValueError) as e:
        doc["error"] = str(e)
        failed = True
        print(f"serve_throughput: error: {e}", file=sys.stderr)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
