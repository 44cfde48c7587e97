#!/usr/bin/python3
"""Markdown summary of `kipp bench --json` documents, with the speed issue's targets.

Usage: bench/cpu_summary.py [--llama LLAMA_BENCH_JSON ...] bench/results/cpu-0.6b-*.json

--llama takes the prefill-512 anchors from llama-bench documents of the same host (as
bench/results/avx2/llama-bench-*.json hold them) instead of the Zen 4 figures below.

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


def llama_prefill_512(path):
    """Prefill-512 tokens/s by weight type from a llama-bench JSON document (a list of records,
    or an object holding them under "results")."""
    with open(path) as f:
        d = json.load(f)
    anchors = {}
    for record in d["results"] if isinstance(d, dict) else d:
        if record["n_prompt"] == 512 and record["n_gen"] == 0:
            anchors[record["model_type"].split()[-1].lower()] = record["avg_ts"]
    return anchors


def main(args):
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    anchors, paths = dict(LLAMA_CPP_PREFILL_512), []
    llama = False
    while args:
        arg = args.pop(0)
        if arg == "--llama":
            if not llama:
                anchors, llama = {}, True
            anchors.update(llama_prefill_512(args.pop(0)))
        else:
            paths.append(arg)
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
        anchor = anchors.get(dtype)
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
