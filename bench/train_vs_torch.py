#!/usr/bin/python3
"""Training throughput and peak memory of Kipp against PyTorch on the same model, side by side.

For each config (configs/tiny.yaml, configs/small.yaml, both with a 32000-token vocabulary) and
sequence length (256, 512), runs Kipp's bench/train_bench and the PyTorch reference
(tools/train_reference.py bench --full-step, Debian's python3-torch) alternately, each run a
fresh process with the same threads, batch and step: zero the gradients, forward and backward
of the mean cross-entropy over random tokens, clip the gradient norm to 1.0, AdamW. Reports the
medians over --repeats runs of each (a run's figure is itself the median of its timed steps) and
the ratios Kipp / PyTorch, and writes a JSON result with the machine's facts and the commands.

Usage: bench/train_vs_torch.py [--train-bench build/release/bench/train_bench] [--threads 2]
           [--repeats 3] [--out bench/results/train-cpu.json]
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

PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
REFERENCE = "tools/train_reference.py"
BLAS_ALTERNATIVE = "libblas.so.3-x86_64-linux-gnu"
OPENBLAS_OPENMP = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3"

# (config, seq, batch, timed steps): the same batch for both implementations, sized so one step
# stays within about 10 s on two cores.
CASES = [
    ("tiny", 256, 8, 5),
    ("tiny", 512, 4, 5),
    ("small", 256, 4, 3),
    ("small", 512, 2, 3),
]
VOCAB = 32000  # tiny's vocab_size is "auto" (the tokenizer's); both use small's 32000


def command_output(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()
    except OSError as e:
        return f"unavailable ({e})"


def check_blas():
    """PyTorch (BLAS_INFO=generic) calls whatever libblas.so.3 points at; anything but the
    OpenMP OpenBLAS would make this a comparison with a single-threaded or reference BLAS."""
    query = command_output(["update-alternatives", "--query", BLAS_ALTERNATIVE])
    value = [line.split(":", 1)[1].strip() for line in query.splitlines() if line.startswith("Value:")]
    if value != [OPENBLAS_OPENMP]:
        sys.exit(f"train_vs_torch: {BLAS_ALTERNATIVE} points at {value[0] if value else 'nothing'}, "
                 f"not the OpenMP OpenBLAS PyTorch must use here. Fix (as root):\n"
                 f"  apt-get install libopenblas0-openmp && "
                 f"update-alternatives --set {BLAS_ALTERNATIVE} {OPENBLAS_OPENMP}")


def load_1min():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_for_quiet(limit_s=300, threshold=1.5):
    """Waits (up to limit_s) for the 1-minute load to drop to `threshold`; returns what it saw."""
    start = time.monotonic()
    first = load_1min()
    while load_1min() > threshold and time.monotonic() - start < limit_s:
        print(f"load {load_1min():.2f} > {threshold}: waiting", flush=True)
        time.sleep(30)
    return {"load_1min_at_start": first, "waited_s": round(time.monotonic() - start),
            "load_1min_after_wait": load_1min()}


def machine_info(threads):
    torch_version = command_output([PYTHON, "-c", "import torch; print(torch.__version__)"])
    blas_line = command_output(["update-alternatives", "--display", BLAS_ALTERNATIVE]).splitlines()
    openblas = command_output(["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "libopenblas0-openmp"])
    return {
        **machine_facts(),
        "torch": torch_version, "openblas": openblas,
        "libblas_alternative": [line.strip() for line in blas_line if "link currently points to" in line],
        "compiler": command_output(["g++", "--version"]).splitlines()[0],
        "omp": {"threads": threads,
                "kipp": "omp_set_num_threads and openblas_set_num_threads (--threads)",
                "pytorch": "OMP_NUM_THREADS set before torch loads (train_reference.py re-executes itself) "
                           "and torch.set_num_threads",
                "environment": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                                "OMP_PROC_BIND", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}},
    }


def run_json(command):
    load = load_1min()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"train_vs_torch: failed ({result.returncode}): {' '.join(command)}\n{result.stderr.strip()}")
    out = json.loads(result.stdout.strip().splitlines()[-1])
    out["load_1min_before"] = load
    return out


def hf_config(model):
    return {"hidden_size": model["d_model"], "num_hidden_layers": model["layers"],
            "num_attention_heads": model["heads"], "num_key_value_heads": model["kv_heads"],
            "head_dim": model["head_dim"], "intermediate_size": model["d_ff"], "vocab_size": model["vocab"],
            "rope_theta": model["rope_theta"], "rms_norm_eps": model["norm_eps"],
            "tie_word_embeddings": model["tied"]}


def summarize(values):
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-bench", default="build/release/bench/train_bench")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="run only CONFIG:SEQ cases, comma-separated (e.g. tiny:256)")
    parser.add_argument("--max-wait", type=int, default=300,
                        help="seconds to wait for the 1-minute load to drop to 1.5 before starting anyway")
    parser.add_argument("--out", default="bench/results/train-cpu.json")
    args = parser.parse_args()
    if not os.path.exists(args.train_bench):
        sys.exit(f"train_vs_torch: {args.train_bench} not found (build with -DKIPP_BUILD_BENCH=ON)")
    if not os.path.exists(REFERENCE):
        sys.exit(f"train_vs_torch: run from the repository root ({REFERENCE} not found)")
    check_blas()
    cases = CASES
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in CASES if f"{c[0]}:{c[1]}" in wanted]
    quiet = wait_for_quiet(args.max_wait)
    print(f"load: {quiet}", flush=True)
    started = time.monotonic()

    results, commands = {}, {}
    with tempfile.TemporaryDirectory() as work:
        for name, seq, batch, steps in cases:
            ours_cmd = [args.train_bench, "--config", f"configs/{name}.yaml", "--vocab", str(VOCAB), "--seq", str(seq),
                        "--batch", str(batch), "--steps", str(steps), "--threads", str(args.threads), "--json"]
            config_path = os.path.join(work, f"{name}.json")
            torch_cmd = [PYTHON, REFERENCE, "bench", "--full-step", "--config", config_path,
                         "--batch-size", str(batch), "--seq-len", str(seq), "--iterations", str(steps),
                         "--threads", str(args.threads)]
            ours_runs, torch_runs = [], []
            for r in range(args.repeats):
                # ABBA order, so a drift in the machine's speed does not favour either; the first
                # Kipp run (r == 0 starts with it) gives the dimensions PyTorch builds.
                order = ["ours", "torch"] if r % 2 == 0 else ["torch", "ours"]
                for which in order:
                    if which == "ours":
                        ours_runs.append(run_json(ours_cmd))
                        if not os.path.exists(config_path):
                            with open(config_path, "w") as f:
                                json.dump(hf_config(ours_runs[0]["model"]), f)
                        print(f"{name} seq {seq} kipp  {ours_runs[-1]['tokens_per_s_median']:8.1f} tok/s "
                              f"{ours_runs[-1]['peak_rss_mib']:7.1f} MiB", flush=True)
                    else:
                        torch_runs.append(run_json(torch_cmd))
                        print(f"{name} seq {seq} torch {torch_runs[-1]['tokens_per_s']:8.1f} tok/s "
                              f"{torch_runs[-1]['peak_rss_mb']:7.1f} MiB", flush=True)
            # For information (not in the ratios): Kipp with activation recomputation, which
            # configs/small.yaml trains with; PyTorch's reference has no equivalent here.
            recompute_run = run_json(ours_cmd + ["--recompute"])
            print(f"{name} seq {seq} kipp --recompute {recompute_run['tokens_per_s_median']:8.1f} tok/s "
                  f"{recompute_run['peak_rss_mib']:7.1f} MiB", flush=True)
            if torch_runs[0]["parameters"] != ours_runs[0]["model"]["parameters"]:
                sys.exit(f"train_vs_torch: {name}: PyTorch has {torch_runs[0]['parameters']} parameters, "
                         f"Kipp {ours_runs[0]['model']['parameters']}")
            ours_tps = [r["tokens_per_s_median"] for r in ours_runs]
            torch_tps = [r["tokens_per_s"] for r in torch_runs]
            ours_rss = [r["peak_rss_mib"] for r in ours_runs]
            torch_rss = [r["peak_rss_mb"] for r in torch_runs]
            tps_ratio = statistics.median(ours_tps) / statistics.median(torch_tps)
            rss_ratio = statistics.median(ours_rss) / statistics.median(torch_rss)
            key = f"{name}-seq{seq}"
            results[key] = {
                "config": f"configs/{name}.yaml", "model": ours_runs[0]["model"], "seq": seq, "batch": batch,
                "tokens_per_step": batch * seq, "timed_steps_per_run": steps,
                "kipp": {"tokens_per_s": summarize(ours_tps), "peak_rss_mib": summarize(ours_rss),
                         "step_s_median": round(statistics.median(r["step_s_median"] for r in ours_runs), 3),
                         "state_mib": round(ours_runs[0]["state_mib"], 1),
                         "workspace_mib": round(ours_runs[0]["workspace_mib"], 1)},
                "pytorch": {"tokens_per_s": summarize(torch_tps), "peak_rss_mib": summarize(torch_rss),
                            "step_s_median": round(statistics.median(r["step_s"] for r in torch_runs), 3),
                            "peak_rss_mib_before_model": round(statistics.median(
                                r["peak_rss_mb_before_model"] for r in torch_runs), 1)},
                "kipp_recompute_blocks_one_run": {
                    "tokens_per_s": round(recompute_run["tokens_per_s_median"], 1),
                    "peak_rss_mib": round(recompute_run["peak_rss_mib"], 1),
                    "workspace_mib": round(recompute_run["workspace_mib"], 1)},
                "ratio_tokens_per_s": round(tps_ratio, 2),
                "ratio_peak_rss": round(rss_ratio, 2),
                "meets_1_5x_tokens_per_s": tps_ratio >= 1.5,
                "meets_peak_rss_not_higher": rss_ratio <= 1.0,
                "runs": {"kipp": ours_runs, "pytorch": torch_runs, "kipp_recompute_blocks": [recompute_run]},
            }
            commands[key] = {"kipp": " ".join(ours_cmd), "kipp_recompute_blocks": " ".join(ours_cmd + ["--recompute"]),
                             "pytorch": " ".join(torch_cmd).replace(config_path, f"<{name} dims as HF config.json>")}
            print(f"{key}: tokens/s x{tps_ratio:.2f}, peak RSS x{rss_ratio:.2f}", flush=True)

    document = {
        "benchmark": "training step tokens/s and peak RSS: Kipp (bench/train_bench) vs PyTorch "
                     "(tools/train_reference.py bench --full-step), same model, batch, threads",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "step": "zero grads + forward/backward (mean cross-entropy, random tokens) + clip grad norm 1.0 + AdamW; "
                "one warm-up step, figure per run = median over its timed steps; each run a fresh process, "
                "Kipp and PyTorch alternated (ABBA)",
        "pytorch_model": "tools/train_reference.py: eager float32 modules, attention with an explicit causal "
                         "score matrix (torch 1.13 has no scaled_dot_product_attention), torch.optim.AdamW "
                         "defaults (no foreach on CPU)",
        "peak_rss": "getrusage ru_maxrss of the whole process (MiB); for PyTorch that includes the "
                    "interpreter and torch's libraries (peak_rss_mib_before_model)",
        "targets": {"tokens_per_s_ratio_at_least": 1.5, "peak_rss_ratio_at_most": 1.0},
        "repeats": args.repeats,
        "vocab": VOCAB,
        "machine": machine_info(args.threads),
        "load": dict(quiet, load_1min_at_end=load_1min(), run_s=round(time.monotonic() - started)),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commands": commands,
        "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    print("wrote", args.out)
    print(f"{'case':<14}{'kipp tok/s':>12}{'torch tok/s':>13}{'x':>6}{'kipp MiB':>10}{'torch MiB':>11}{'x':>6}")
    for key, r in results.items():
        print(f"{key:<14}{r['kipp']['tokens_per_s']['median']:>12.1f}{r['pytorch']['tokens_per_s']['median']:>13.1f}"
              f"{r['ratio_tokens_per_s']:>6.2f}{r['kipp']['peak_rss_mib']['median']:>10.1f}"
              f"{r['pytorch']['peak_rss_mib']['median']:>11.1f}{r['ratio_peak_rss']:>6.2f}")


if __name__ == "__main__":
    main()
