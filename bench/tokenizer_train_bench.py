#!/usr/bin/env python3
"""Measures `kipp tokenizer train`: wall time (counting and merging) and peak RSS for a BPE
vocabulary learned from a ~100 MB text corpus built from what a Debian machine ships (fortunes,
/usr/share/doc text and changelogs, in sorted path order, invalid UTF-8 replaced), and writes
bench/results/tokenizer-train.json with the machine, the command and the corpus hash.

Usage: bench/tokenizer_train_bench.py --kipp build/release/kipp [--corpus PATH] [--size-mb 100]
           [--vocab-size 32000] [--threads 0] [--repeats 5] [--out bench/results/tokenizer-train.json]
The corpus is built at PATH (default /tmp/kipp-bpe-corpus-<size>mb.txt) unless it exists.
"""
import argparse
import datetime
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_facts import machine_facts  # noqa: E402


def source_files():
    fortunes = "/usr/share/games/fortunes"
    files = []
    if os.path.isdir(fortunes):
        files += sorted(os.path.join(fortunes, f) for f in os.listdir(fortunes)
                        if not f.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(fortunes, f)))
    docs = []
    for folder, _, names in os.walk("/usr/share/doc"):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            if name.startswith(("changelog", "NEWS", "README")) or name.endswith((".txt", ".md")):
                docs.append(path)
    return files + sorted(docs)


def build_corpus(path, size):
    sections = {"fortunes": 0, "doc_text": 0, "doc_gz": 0, "repeats": 0}
    parts, total = [], 0
    files = source_files()
    while total < size:
        for f in files:
            try:
                raw = gzip.open(f).read() if f.endswith(".gz") else open(f, "rb").read()
            except OSError:
                continue
            text = raw.decode("utf-8", errors="replace").encode("utf-8")
            parts.append(text if text.endswith(b"\n") else text + b"\n")
            total += len(parts[-1])
            key = "fortunes" if "/fortunes/" in f else "doc_gz" if f.endswith(".gz") else "doc_text"
            sections[key] += 1
            if total >= size:
                break
        else:
            sections["repeats"] += 1
    data = b"".join(parts)[:size]
    data = data[: data.rfind(b"\n") + 1]
    with open(path, "wb") as out:
        out.write(data)
    return sections


def run(kipp, corpus, vocab_size, threads, out_dir):
    command = ["/usr/bin/time", "-f", "%e %M", kipp, "tokenizer", "train", "--input", corpus, "--vocab-size",
               str(vocab_size), "--threads", str(threads), "-q", "-o", os.path.join(out_dir, "tokenizer.json")]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"tokenizer_train_bench: {' '.join(command)} failed:\n{done.stderr}")
    seconds, rss_kib = done.stderr.strip().splitlines()[-1].split()
    summary = done.stdout.strip()
    counting = float(re.search(r"counting ([0-9.]+) s", summary).group(1))
    merging = float(re.search(r"merging ([0-9.]+) s", summary).group(1))
    return {"seconds": float(seconds), "counting_seconds": counting, "merging_seconds": merging,
            "peak_rss_mib": round(int(rss_kib) / 1024, 1), "summary": summary}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kipp", required=True)
    parser.add_argument("--corpus")
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="bench/results/tokenizer-train.json")
    args = parser.parse_args()
    size = args.size_mb * 1000 * 1000
    corpus = args.corpus or f"/tmp/kipp-bpe-corpus-{args.size_mb}mb.txt"
    sections = None
    if not os.path.exists(corpus):
        sections = build_corpus(corpus, size)
    digest = hashlib.sha256(open(corpus, "rb").read()).hexdigest()
    with tempfile.TemporaryDirectory() as scratch:
        runs = [run(args.kipp, corpus, args.vocab_size, args.threads, scratch) for _ in range(args.repeats)]
    ordered = sorted(runs, key=lambda r: r["seconds"])
    median = ordered[len(ordered) // 2]
    result = {
        "benchmark": "kipp tokenizer train (byte-level BPE, Qwen2 pre-tokenizer)",
        "command": " ".join(["bench/tokenizer_train_bench.py", "--kipp", args.kipp, "--size-mb", str(args.size_mb),
                             "--vocab-size", str(args.vocab_size), "--threads", str(args.threads),
                             "--repeats", str(args.repeats)]),
        "machine": machine_facts(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "corpus": {"bytes": os.path.getsize(corpus), "sha256": digest,
                   "builder": "bench/tokenizer_train_bench.py build_corpus", "sections": sections},
        "vocab_size": args.vocab_size,
        "threads": args.threads or os.cpu_count(),
        "runs": runs,
        "median": median,
        "min_seconds": ordered[0]["seconds"],
        "max_seconds": ordered[-1]["seconds"],
    }
    with open(args.out, "w") as out:
        json.dump(result, out, indent=2)
        out.write("\n")
    print(json.dumps(median, indent=2))


if __name__ == "__main__":
    main()
