#!/usr/bin/python3
"""Markdown summary of `kipp bench --json` documents, with the speed issue's targets.

Usage: bench/cpu_summary.py bench/results/cpu-0.6b-*.json

Targets (2 threads): decode >= 80% of the measured read bandwidth (the passes taken between the
decode tokens where the document has them: the median token against the median pass, and
token by token against the pass just before each); prefill of 512 tokens >= 1.1x
llama.cpp's figures on the AMD Zen 4 machine kind (llama-bench -t 2, medians: 273 BF16, 177 Q8_0,
338 Q4_0 tokens/s; affine4 is compared with Q4_0); 8 sequences through eval_batch >= 5x the
single-sequence decode rate.
"""
import json
import sys

LLAMA_CPP_PREFILL_512 = {"bf16": 273.0, "q8_0": 177.0, "q4_1": 338.0}


def paired(decode):
    """Each token against the pass just before it (where the document has it), median (min-max)."""
    f = decode.get("bandwidth_fraction_per_token")
    return f"{f['median']:.0%} ({f['min']:.0%}-{f['max']:.0%})" if f else "-"


def main(paths):
    if not paths or paths[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if paths else 2
    rows = []
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        dtype = d["model"]["projection_dtype"]
        prefill = {p["tokens"]: p for p in d["prefill"]}
        rows.append((dtype, d["engine"]["threads"], prefill, d["decode"], d.get("batch"), d["probes"], path))
    print("| weights | threads | prefill 64 tok/s | prefill 512 tok/s | of peak | vs llama.cpp | decode tok/s | GB/s | of bandwidth (median / best pass) | token by token | batch 8 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for dtype, threads, prefill, decode, batch, probes, _ in sorted(rows, key=lambda r: (r[0], -r[1])):
        p64, p512 = prefill.get(64), prefill.get(512)
        # The passes taken between the decode tokens where the document has them, else the
        # probe before the runs.
        bw = decode.get("bandwidth_alongside") or probes["read_bandwidth"]
        achieved = decode["achieved_gb_per_second"]
        def med(p):
            t = p["tokens_per_second"]
            return f"{t['median']:.1f} ({t['min']:.0f}-{t['max']:.0f})"
        anchor = LLAMA_CPP_PREFILL_512.get(dtype)
        print(f"| {dtype} | {threads} | {med(p64) if p64 else '-'} | {med(p512) if p512 else '-'} | "
              f"{p512['fraction_of_peak']:.0%} of {p512['peak_kind']} | "
              f"{p512['tokens_per_second']['median'] / anchor:.2f}x | "
              f"{decode['tokens_per_second']['median']:.1f} | {achieved:.1f} | "
              f"{achieved / bw['median_gb_per_second']:.0%} / {achieved / bw['best_gb_per_second']:.0%} | "
              f"{paired(decode)} | "
              f"{batch['speedup_vs_single_sequence']:.2f}x |" if batch else "- |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
