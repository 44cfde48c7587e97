#!/usr/bin/env python3
"""gpu_summary.py: the results of scripts/gpu_check.sh as OUT/summary.json and a short table.

Reads the steps table the check wrote (name, kind, status, exit code, seconds, log, note per
line), the JSON results (kipp bench runs bench_*.json, torch_anchor.json, serve.json, the
training bench's train_bench.json, the convergence gate's train_convergence.json, gpu.csv) and
the bundle's BUILD_INFO; writes OUT/summary.json, OUT/bench_cuda.json (the bench runs, one
list), OUT/torch_anchor.json, OUT/serve_cuda.json and OUT/train_cuda.json; prints the table
last. The headline figures are set beside the targets: serving's for the 0.6b BF16 model,
training's for the small config (and the 6 GB recipe, and the convergence gate's 2%).
"""

import argparse
import csv
import importlib.util
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


def verdict(target):
    """The target with "met" set: None when not measured; "better" says which way (default higher)."""
    v, t = target["value"], target["target"]
    target.setdefault("better", "higher")
    measured = isinstance(v, (int, float)) and isinstance(t, (int, float))
    target["met"] = None if not measured else (v >= t if target["better"] == "higher" else v <= t)
    return target


def serving_targets(bench, anchor):
    """The serving targets for the 0.6b BF16 model, each with the measured value (None: not measured)."""
    dec = bench["decode"] or {}
    b1 = dec.get("tokens_per_second")
    b32 = get(bench, "batch", "32", "tokens_per_second")
    torch_b1 = get(anchor, "eager", "decode", "1")
    return [verdict(t) for t in [
        {"what": "decode batch 1, fraction of measured bandwidth", "target": 0.60, "value": dec.get("bandwidth_fraction")},
        {"what": "decode batch 1 / PyTorch eager", "target": 3.0, "value": ratio(b1, torch_b1)},
        {"what": "decode batch 32 / batch 1 (aggregate)", "target": 15.0, "value": ratio(b32, b1)},
        {"what": "prefill 2048, fraction of BF16 peak", "target": 0.50, "value": get(bench, "prefill", "2048", "fraction_of_peak")},
    ]]


TRAINING_GATES = ("cuda_train_gates", "train_resume_cuda", "train_convergence_cuda")


def training_figures(train, convergence, steps):
    """Per case of the training bench: tokens/s, MFU and peak GPU memory of Kipp and PyTorch, the
    ratios; the convergence gate's losses; the training gates' statuses."""
    cases = {}
    for name, case in (get(train, "cases") or {}).items():
        runs = case.get("runs") or {}
        row = {"batch": case.get("batch"), "seq_len": case.get("seq_len"),
               "kipp_over_torch_eager": case.get("kipp_over_torch_eager"),
               "kipp_over_torch_compile": case.get("kipp_over_torch_compile")}
        for label, run in runs.items():
            row[label] = {"tokens_per_s": run.get("tokens_per_s"), "mfu": run.get("mfu"),
                          "peak_bytes": run.get("peak_gpu_memory_bytes", run.get("peak_allocated_bytes")),
                          "error": run.get("error") or run.get("skipped")}
        cases[name] = row
    gates = {s["name"]: s["status"] for s in steps if s["name"] in TRAINING_GATES}
    return {"cases": cases, "convergence": convergence if isinstance(convergence, dict) else None, "gates": gates}


def training_targets(train, convergence):
    """The training targets: the training bench's (bench/train_cuda_vs_torch.py's TARGETS: the small
    config, the 6 GB recipe), each valued from its JSON, and the convergence gate's tolerance."""
    spec = importlib.util.spec_from_file_location("train_bench", Path(__file__).resolve().parent.parent / "bench" /
                                                  "train_cuda_vs_torch.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    found = [verdict({"what": what, "target": bound, "better": better,
                      "value": get(train, "cases", name, key)}) for what, bound, better, (name, key) in bench.TARGETS]
    found.append(verdict({"what": "tiny config: GPU against CPU final validation loss, relative difference",
                          "target": get(convergence, "tolerance"), "better": "lower",
                          "value": get(convergence, "relative_difference")}))
    return found


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
    train = load_json(results / "train_bench.json")
    convergence = load_json(results / "train_convergence.json")
    train_fig = training_figures(train, convergence, steps)

    summary = {"dry_run": bool(args.dry_run), "seconds": args.seconds, "problems": args.problems,
               "gpu": gpu, "bundle": build, "steps": steps,
               "figures": {"kipp_bench": bench, "torch_anchor": anchor_fig, "serve_tokens_per_second": serve_fig,
                           "training": train_fig},
               "targets": {"serving": serving_targets(bench, anchor_fig or {}),
                           "training": training_targets(train, convergence)}}
    write_json(out / "summary.json", summary)
    if runs:
        write_json(out / "bench_cuda.json", runs)
    if anchor is not None:
        write_json(out / "torch_anchor.json", anchor)
    if serve is not None:
        write_json(out / "serve_cuda.json", serve)
    if train is not None:
        write_json(out / "train_cuda.json", train)

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
        print_training(train_fig)
        for kind, found in summary["targets"].items():
            for t in found:
                word = "not measured" if t["met"] is None else ("met" if t["met"] else "missed")
                bound = "at least" if t["better"] == "higher" else "at most"
                print(f"{kind} target {t['what']}: {fmt(t['value'], 3)} ({bound} {t['target']}) {word}")
    return 0


def print_training(fig):
    gates = ", ".join(f"{n} {s}" for n, s in fig["gates"].items()) or "-"
    print(f"training gates: {gates}")
    conv = fig["convergence"]
    if conv:
        print(f"  convergence: final validation loss CPU {fmt(conv.get('cpu_validation_loss'), 4)}, "
              f"GPU {fmt(conv.get('gpu_validation_loss'), 4)}, relative difference {fmt(conv.get('relative_difference'), 4)}")
    if fig["cases"]:
        print("kipp train --device cuda vs PyTorch, tokens/s (MFU, peak GiB):")
    for name, row in fig["cases"].items():
        parts = []
        for label in ("kipp", "torch_eager", "torch_compile"):
            run = row.get(label)
            if run is None:
                continue
            if run["tokens_per_s"] is None:
                parts.append(f"{label} {(run['error'] or 'not measured')[:60]}")
            else:
                peak = run["peak_bytes"] / (1 << 30) if run["peak_bytes"] else None
                parts.append(f"{label} {fmt(run['tokens_per_s'], 0)} ({fmt(run['mfu'], 3)}, {fmt(peak, 2)})")
        print(f"  {name} {row['batch']}x{row['seq_len']}: " + "; ".join(parts) +
              f"; kipp/eager x{fmt(row['kipp_over_torch_eager'], 2)}, kipp/compile x{fmt(row['kipp_over_torch_compile'], 2)}")


if __name__ == "__main__":
    sys.exit(main())
