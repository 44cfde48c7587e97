#!/usr/bin/env python3
"""Measures `kipp convert` on a Hugging Face checkpoint folder: wall time and peak RSS per
quantization scheme (median, min and max over repeats, each a fresh process), and writes
a JSON result with the machine's facts and the command that produced it.

Usage: bench/convert_bench.py --kipp build/release/kipp --model build/release/models/qwen3-0.6b-hf
           [--repeats 3] [--out bench/results/convert-0.6b.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from machine_facts import machine_facts


def run_once(kipp, model, quant, out):
    start = time.monotonic()
    result = subprocess.run([kipp, "convert", model, "-o", out, "--quant", quant],
                            capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"convert failed: {result.stderr.strip()}")
    # kipp reports its own peak RSS (getrusage); a parent's RUSAGE_CHILDREN would be the max
    # over every child so far.
    line = [l for l in result.stdout.splitlines() if l.startswith("wrote ")][-1]
    rss_mib = float(line.rsplit("peak RSS", 1)[1].split()[0])
    return seconds, rss_mib, os.path.getsize(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kipp", required=True)
    parser.add_argument("--model", required=True, help="HF checkpoint folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="bench/results/convert-0.6b.json")
    args = parser.parse_args()
    weights = sum(os.path.getsize(os.path.join(args.model, f)) for f in os.listdir(args.model)
                  if f.endswith(".safetensors"))
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for quant in ("bf16", "q8_0", "affine4"):
            runs = [run_once(args.kipp, args.model, quant, os.path.join(work, f"{quant}.gguf"))
                    for _ in range(args.repeats)]
            seconds = [r[0] for r in runs]
            rss = [r[1] for r in runs]
            results[quant] = {
                "seconds_median": round(statistics.median(seconds), 2),
                "seconds_min": round(min(seconds), 2), "seconds_max": round(max(seconds), 2),
                "peak_rss_mib_median": statistics.median(rss), "peak_rss_mib_max": max(rss),
                "output_mib": round(runs[0][2] / 2**20, 1),
                "peak_rss_fraction_of_output": round(statistics.median(rss) * 2**20 / runs[0][2], 3),
            }
            print(quant, results[quant], flush=True)
    document = {
        "benchmark": "kipp convert (streaming HF safetensors -> GGUF)",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "model": os.path.basename(os.path.normpath(args.model)),
        "source_weights_mib": round(weights / 2**20, 1),
        "repeats": args.repeats,
        "machine": machine_facts(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
