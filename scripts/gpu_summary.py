#!/usr/bin/env python3
"""gpu_summary.py: the results of scripts/gpu_check.sh as OUT/summary.json and a short table.

Reads the steps table the check wrote (name, kind, status, exit code, seconds, log, note per
line), the JSON results (kipp bench runs bench_*.json, torch_anchor.json, serve.json, gpu.csv)
and the bundle's BUILD_INFO; writes OUT/summary.json, OUT/bench_cuda.json (the bench runs, one
list), OUT/torch_anchor.json and OUT/serve_cuda.json; prints the table last. The headline
figures are set beside the targets of the CUDA issue for the 0.6b BF16 model.
"""

import argparse
import csv
import json
import sys
from pathlib import Path


def load_json(path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def get(doc, *keys):
    for k in keys:
        if isinstance(doc, dict):
            doc = doc.get(k)
        elif isinstance(doc, list) and isinstance(k, int) and -len(doc) <= k < len(doc):
            doc = doc[k]
        else:
            return None
    return doc


def read_steps(path):
    steps = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        cols = (line.split("\t") + [""] * 7)[:7]
        name, kind, status, rc, seconds, log, note = cols
        steps.append({"name": name, "kind": kind, "status": status, "exit": int(rc) if rc.lstrip("-").isdigit() else None,
                      "seconds": float(seconds) if seconds else None, "log": log or None, "note": note or None})
    return steps


def bench_figures(runs):
    """Headline figures from the kipp bench runs: prefill per length, decode, batch per size."""
    fig = {"prefill": {}, "decode": None, "batch": {}, "probes": None, "device": None}
    for run in runs:
        doc = run["result"]
        for p in doc.get("prefill") or []:
            fig["prefill"][str(p.get("tokens"))] = {"tokens_per_second": get(p, "tokens_per_second", "median"),
                                                   "fraction_of_peak": p.get("fraction_of_peak")}
        if fig["decode"] is None and isinstance(doc.get("decode"), dict):
            d = doc["decode"]
            fig["decode"] = {"tokens_per_second": get(d, "tokens_per_second", "median"),
                             "bandwidth_fraction": d.get("bandwidth_fraction"), "prompt_tokens": d.get("prompt_tokens")}
        # "batches" lists every --batch size where a run takes several; "batch" is the first.
        for b in (doc.get("batches") or []) + [doc.get("batch")]:
            if isinstance(b, dict) and b.get("sequences") and str(b["sequences"]) not in fig["batch"]:
                fig["batch"][str(b["sequences"])] = {
                    "tokens_per_second": get(b, "aggregate_tokens_per_second", "median"),
                    "speedup_vs_single_sequence": b.get("speedup_vs_single_sequence")}
        for key in ("probes", "device"):
            if fig[key] is None and doc.get(key):
                fig[key] = doc[key]
    return fig


def anchor_figures(doc):
    fig = {}
    for mode in ("eager", "compiled"):
        fig[mode] = {"prefill": {str(r["tokens"]): r["tokens_per_second"] for r in get(doc, mode, "prefill") or []},
                     "decode": {str(r["sequences"]): r["tokens_per_second"] for r in get(doc, mode, "decode") or []}}
    return fig


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def targets(bench, anchor):
    """The issue's targets for the 0.6b BF16 model, each with the measured value (None: not measured)."""
    dec = bench["decode"] or {}
    b1 = dec.get("tokens_per_second")
    b32 = get(bench, "batch", "32", "tokens_per_second")
    torch_b1 = get(anchor, "eager", "decode", "1")
    return [
        {"what": "decode batch 1, fraction of measured bandwidth", "target": 0.60, "value": dec.get("bandwidth_fraction")},
        {"what": "decode batch 1 / PyTorch eager", "target": 3.0, "value": ratio(b1, torch_b1)},
        {"what": "decode batch 32 / batch 1 (aggregate)", "target": 15.0, "value": ratio(b32, b1)},
        {"what": "prefill 2048, fraction of BF16 peak", "target": 0.50, "value": get(bench, "prefill", "2048", "fraction_of_peak")},
    ]


def fmt(x, digits=1):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}" if abs(x) >= 0.01 or x == 0 else f"{x:.2e}"
    return str(x)


def write_json(path, doc):
    Path(path).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--bundle-info", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dry-run", type=int, default=0)
    p.add_argument("--seconds", type=int, default=0)
    p.add_argument("--problems", type=int, default=0)
    args = p.parse_args(argv)
    results, out = Path(args.results), Path(args.out)

    steps = read_steps(args.steps)
    gpu = None
    if (results / "gpu.csv").exists():
        rows = list(csv.reader((results / "gpu.csv").read_text(encoding="utf-8").splitlines()))
        if len(rows) >= 2:
            gpu = dict(zip([c.strip() for c in rows[0]], [c.strip() for c in rows[1]]))
    try:
        build = Path(args.bundle_info).read_text(encoding="utf-8").splitlines()
    except OSError:
        build = []

    runs = []
    for f in sorted(results.glob("bench_*.json")):
        doc = load_json(f)
        if isinstance(doc, dict):
            runs.append({"name": f.stem, "result": doc})
    anchor = load_json(results / "torch_anchor.json")
    serve = load_json(results / "serve.json")
    bench = bench_figures(runs)
    anchor_fig = anchor_figures(anchor) if isinstance(anchor, dict) else None
    serve_fig = {str(lv.get("concurrency")): lv.get("tokens_per_s") for lv in get(serve, "levels") or []}

    summary = {"dry_run": bool(args.dry_run), "seconds": args.seconds, "problems": args.problems,
               "gpu": gpu, "bundle": build, "steps": steps,
               "figures": {"kipp_bench": bench, "torch_anchor": anchor_fig, "serve_tokens_per_second": serve_fig},
               "targets": targets(bench, anchor_fig or {})}
    write_json(out / "summary.json", summary)
    if runs:
        write_json(out / "bench_cuda.json", runs)
    if anchor is not None:
        write_json(out / "torch_anchor.json", anchor)
    if serve is not None:
        write_json(out / "serve_cuda.json", serve)

    card = (gpu or {}).get("name", "no GPU (dry run)" if args.dry_run else "unknown GPU")
    print()
    print(f"GPU check{' (DRY RUN: nothing ran on a GPU)' if args.dry_run else ''}: {card}, {args.seconds} s, "
          f"{args.problems} problem(s)")
    print(f"{'step':26} {'kind':6} {'status':10} {'exit':>5} {'s':>7}  note")
    for s in steps:
        print(f"{s['name'][:26]:26} {s['kind'][:6]:6} {s['status'][:10]:10} {fmt(s['exit']):>5} {fmt(s['seconds']):>7}  "
              f"{(s['note'] or '')[:70]}")
    if not args.dry_run:
        ceil = get(bench, "device", "ceilings") or {}
        if ceil:
            print(f"card ceilings (kipp bench): copy {fmt((ceil.get('copy_bytes_per_second') or 0) / 1e9)} GB/s, "
                  f"BF16 product {fmt((ceil.get('bf16_flops_per_second') or 0) / 1e12)} TFLOP/s")
        print("kipp bench (0.6b bf16), tokens/s:")
        for n, v in bench["prefill"].items():
            print(f"  prefill {n:>5}: {fmt(v['tokens_per_second'])}  (peak fraction {fmt(v['fraction_of_peak'], 3)})")
        if bench["decode"]:
            d = bench["decode"]
            print(f"  decode b1    : {fmt(d['tokens_per_second'])}  (bandwidth fraction {fmt(d['bandwidth_fraction'], 3)})")
        for n, v in bench["batch"].items():
            print(f"  decode b{n:<4}: {fmt(v['tokens_per_second'])}  (x{fmt(v['speedup_vs_single_sequence'], 2)} one sequence)")
        if anchor_fig:
            for mode in ("eager", "compiled"):
                pre = ", ".join(f"{k}: {fmt(v)}" for k, v in anchor_fig[mode]["prefill"].items()) or "-"
                dec = ", ".join(f"b{k}: {fmt(v)}" for k, v in anchor_fig[mode]["decode"].items()) or "-"
                print(f"PyTorch {mode:8} prefill {pre}; decode {dec}")
        if serve_fig:
            print("kipp serve tokens/s: " + ", ".join(f"c{k}: {fmt(v)}" for k, v in serve_fig.items()))
        for t in summary["targets"]:
            v = t["value"]
            verdict = "-" if v is None else ("met" if v >= t["target"] else "missed")
            print(f"target {t['what']}: {fmt(v, 3)} (target {t['target']}) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
