#!/usr/bin/env python3
"""Data-parallel training on one host: `mpirun -np 2 kipp train` with one thread per rank against
one process with two threads, at the same global batch (2 ranks x grad_accum 1 = 1 process x
grad_accum 2), and the time each step spends summing gradients across ranks, with the sums
started during the backward pass (train.allreduce_overlap) and after it. Writes
bench/results/train-scaling.json.

    bench/train_scaling.py [--kipp build/release/kipp] [--steps 8] [--out FILE]

The corpus is tests/train/corpus.md with a 32000-entry BPE tokenizer learnt from it (the
vocabulary configs/small.yaml fixes; tiny gets the same). Per-step figures are read from the
run log (log.every 1) and are the median over the steps after the first two.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_facts import machine_facts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP_STEPS = 2

# The configs as shipped, with the batch cut down where a step would take minutes on 2 cores.
CASES = {
    "tiny": {"config": "configs/tiny.yaml", "sets": ["model.vocab_size=32000"]},
    "small": {"config": "configs/small.yaml", "sets": ["train.seq_len=256", "train.micro_batch=2"]},
}

# (name, ranks, threads per rank, grad_accum per rank, allreduce_overlap)
VARIANTS = [
    ("1 rank x 2 threads", 1, 2, 2, True),
    ("2 ranks x 1 thread, overlap", 2, 1, 1, True),
    ("2 ranks x 1 thread, no overlap", 2, 1, 1, False),
]


def load_1min():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_case(kipp, work, tokenizer, corpus, case, variant, steps):
    name, ranks, threads, accum, overlap = variant
    run_dir = os.path.join(work, f"{case}-{ranks}-{int(overlap)}")
    sets = CASES[case]["sets"] + [
        f"tokenizer={tokenizer}", f"data.train=[{corpus}]", f"data.cache_dir={work}/cache",
        f"run.dir={run_dir}", f"train.max_steps={steps}", "train.warmup_steps=1", f"train.threads={threads}",
        f"train.grad_accum={accum}", f"train.allreduce_overlap={'true' if overlap else 'false'}", "log.every=1",
        "eval.every=0", "checkpoint.every=0", "checkpoint.keep_last=1", "data.validation_fraction=0.05"]
    command = [kipp, "train", "--config", os.path.join(ROOT, CASES[case]["config"]), "--plain"]
    for s in sets:
        command += ["--set", s]
    if ranks > 1:
        command = ["mpirun", "--oversubscribe", "-np", str(ranks)] + command
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS=str(threads))
    log = subprocess.run(command, env=env, capture_output=True, text=True)
    if log.returncode != 0:
        sys.exit(f"{case} / {name} failed:\n{log.stdout}\n{log.stderr}")
    records = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    step_records = [r for r in records if r["type"] == "step"]
    times = [b["elapsed_seconds"] - a["elapsed_seconds"] for a, b in zip(step_records, step_records[1:])]
    timed = step_records[WARMUP_STEPS:]
    times = times[WARMUP_STEPS - 1:]
    params = next(line for line in log.stderr.splitlines() if line.startswith("data:"))
    result = {
        "variant": name, "ranks": ranks, "threads_per_rank": threads, "grad_accum_per_rank": accum,
        "allreduce_overlap": overlap if ranks > 1 else None,
        "step_seconds_median": round(statistics.median(times), 4),
        "tokens_per_second_median": round(statistics.median(r["tokens_per_second"] for r in timed), 1),
        "steps_timed": len(times),
        "model": params.split("; ")[1],
        "command": " ".join(command).replace(work, "WORK").replace(ROOT + "/", ""),
    }
    if ranks > 1:
        result["allreduce_seconds_median"] = round(statistics.median(r["allreduce_seconds"] for r in timed), 4)
        result["allreduce_after_backward_seconds_median"] = round(
            statistics.median(r["allreduce_wait_seconds"] for r in timed), 4)
        result["allreduce_share_median"] = round(statistics.median(r["allreduce_share"] for r in timed), 3)
    shutil.rmtree(run_dir)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kipp", default=os.path.join(ROOT, "build/release/kipp"))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/train-scaling.json"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="kipp-train-scaling-")
    corpus = os.path.join(ROOT, "tests/train/corpus.md")
    tokenizer = os.path.join(work, "tokenizer.json")
    subprocess.run([args.kipp, "tokenizer", "train", "--input", corpus, "--vocab-size", "32000", "--quiet",
                    "-o", tokenizer], check=True)
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    load_start = load_1min()
    results = {}
    for case in args.cases:
        results[case] = []
        for variant in VARIANTS:
            result = run_case(args.kipp, work, tokenizer, corpus, case, variant, args.steps)
            print(json.dumps(result), flush=True)
            results[case].append(result)
    shutil.rmtree(work)
    out = {
        "benchmark": "data-parallel training on one host: 2 MPI ranks x 1 thread against 1 process x 2 threads at "
                     "the same global batch, and the per-step time in gradient sums across ranks",
        "command": "bench/train_scaling.py " + " ".join(sys.argv[1:]),
        "step": "one optimizer step (forward/backward of every micro-batch, gradient sums across ranks, clip, "
                "AdamW); figures are medians over the steps after the first two, read from the run log",
        "allreduce": "allreduce_seconds: time in MPI calls per step (gradient buckets started during the backward "
                     "pass, their progress calls, the wait after it, the loss and target-count sums); "
                     "allreduce_after_backward_seconds: the part after the backward pass (what overlap hides is "
                     "the difference to the no-overlap variant's); share: of the step's wall time",
        "corpus": "tests/train/corpus.md, tokenizer learnt from it by kipp tokenizer train --vocab-size 32000",
        "mpi": mpi,
        "machine": machine_facts(),
        "load": {"load_1min_at_start": load_start, "load_1min_at_end": load_1min()},
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
