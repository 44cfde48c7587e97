#!/usr/bin/python3
"""Training throughput and peak memory of Kipp against PyTorch on the same model, side by side.

Each run is a fresh process with the same threads, batch and step: zero the gradients, forward
and backward of the mean cross-entropy over random tokens, clip the gradient norm to 1.0, AdamW.
The runs of a case alternate (ABBA: the variants in order, then reversed); a run's figure is the
median of its timed steps, and a case reports the median, min and max over its runs.

Pre-training (configs/tiny.yaml, configs/small.yaml, a 32000-token vocabulary): Kipp's
bench/train_bench at --precision fp32 and bf16, PyTorch (tools/train_reference.py bench
--full-step) in float32 and under BF16 autocast. Fine-tuning Qwen3-0.6B's shape (the synthetic
models under --models, random weights): the full fine-tune the same four ways, and LoRA r=16
(alpha 32, all seven projections, AdamW on the adapters only): Kipp's bench/lora_bench on the
BF16 base at both precisions and on the affine4 base (QLoRA), PyTorch's train_reference.py bench
--lora-rank 16 (base in FP32, or BF16 under autocast). Writes a JSON result with the machine's
facts, the commands, every run, the ratios and whether each target is met.

Usage: bench/train_vs_torch.py [--train-bench build/release/bench/train_bench]
           [--lora-bench build/release/bench/lora_bench] [--models build/release/models]
           [--threads 2] [--repeats 2] [--finetune-repeats 1] [--only tiny:256,qwen3-0.6b:256]
           [--out bench/results/train-cpu.json]
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

# (config, seq, batch, timed steps): the same batch for every implementation, sized so one step
# stays within a few seconds on two cores.
PRETRAIN_CASES = [
    ("tiny", 256, 8, 5),
    ("small", 256, 4, 3),
]
VOCAB = 32000  # tiny's vocab_size is "auto" (the tokenizer's); both use small's 32000
# The fine-tune: one micro-batch small enough that every run (FP32 AdamW over 0.6B parameters
# included) fits in memory without recomputation and the whole case stays within minutes.
FINETUNE_CASE = ("qwen3-0.6b", 256, 1, 1)
LORA_RANK = 16
TARGETS = {"bf16_over_fp32_at_least": 1.6, "bf16_over_pytorch_best_at_least": 1.5,
           "lora_over_full_at_least": 2.5, "lora_bf16_base_peak_rss_gb_at_most": 3.0,
           "qlora_affine4_peak_rss_gb_at_most": 1.5}
MIB_PER_GB = 1e9 / 2**20  # targets are in decimal GB, peak RSS in MiB


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
                                                                "OMP_PROC_BIND", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                                                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}},
    }


def run_json(command, env=None):
    load = load_1min()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
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


def model_section(hf):
    """A Kipp config with the model section of an HF config.json, for train_bench."""
    return "\n".join([
        "model:", f"  vocab_size: {hf['vocab_size']}", f"  d_model: {hf['hidden_size']}",
        f"  n_layers: {hf['num_hidden_layers']}", f"  n_heads: {hf['num_attention_heads']}",
        f"  n_kv_heads: {hf['num_key_value_heads']}", f"  head_dim: {hf['head_dim']}",
        f"  d_ff: {hf['intermediate_size']}", f"  norm_eps: {hf['rms_norm_eps']}",
        f"  rope_theta: {float(hf['rope_theta'])}", f"  weight_tying: {str(hf['tie_word_embeddings']).lower()}", ""])


def summarize(values):
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1)}


def tokens_per_s(run):
    return run["tokens_per_s_median"] if "tokens_per_s_median" in run else run["tokens_per_s"]


def peak_rss(run):
    return run["peak_rss_mib"] if "peak_rss_mib" in run else run["peak_rss_mb"]


class Variant:
    """One way of running a case: a command, and what to call it."""

    def __init__(self, name, command, env=None, after_first=None):
        self.name, self.command, self.env, self.after_first = name, command, env, after_first
        self.runs = []


def measure(label, variants, repeats):
    """Runs every variant `repeats` times, in order and then reversed (ABBA), so that a drift in
    the machine's speed favours none; returns {name: summary with its runs}."""
    for r in range(repeats):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            v.runs.append(run_json(v.command, v.env))
            if v.after_first and len(v.runs) == 1:
                v.after_first(v.runs[0])
            print(f"{label} {v.name:<26}{tokens_per_s(v.runs[-1]):9.1f} tok/s {peak_rss(v.runs[-1]):8.1f} MiB",
                  flush=True)
    return {v.name: {"tokens_per_s": summarize([tokens_per_s(x) for x in v.runs]),
                     "peak_rss_mib": summarize([peak_rss(x) for x in v.runs]),
                     "step_s_median": round(statistics.median(
                         x.get("step_s_median", x.get("step_s")) for x in v.runs), 3),
                     "runs": v.runs} for v in variants}


def median_tps(results, name):
    return results[name]["tokens_per_s"]["median"]


def best_of(results, names):
    best = max(names, key=lambda n: median_tps(results, n))
    return best, median_tps(results, best)


def precision_ratios(results, prefix):
    """Kipp BF16 against Kipp FP32 and against PyTorch's faster precision, for one config."""
    bf16, fp32 = median_tps(results, f"kipp-{prefix}bf16"), median_tps(results, f"kipp-{prefix}fp32")
    torch_best, torch_tps = best_of(results, [f"pytorch-{prefix}fp32", f"pytorch-{prefix}bf16-autocast"])
    return {"kipp_bf16_over_kipp_fp32": round(bf16 / fp32, 2),
            "meets_bf16_over_fp32": bf16 / fp32 >= TARGETS["bf16_over_fp32_at_least"],
            "pytorch_best": torch_best,
            "kipp_bf16_over_pytorch_best": round(bf16 / torch_tps, 2),
            "meets_bf16_over_pytorch_best": bf16 / torch_tps >= TARGETS["bf16_over_pytorch_best_at_least"]}


def train_variants(args, config, seq, batch, steps, torch_config, vocab, prefix=""):
    """Kipp's train_bench at both precisions and PyTorch's full step with and without autocast."""
    ours = [args.train_bench, "--config", config, "--vocab", str(vocab), "--seq", str(seq), "--batch", str(batch),
            "--steps", str(steps), "--threads", str(args.threads), "--json"]
    theirs = [PYTHON, REFERENCE, "bench", "--full-step", "--config", torch_config, "--batch-size", str(batch),
              "--seq-len", str(seq), "--iterations", str(steps), "--threads", str(args.threads)]
    return ([Variant(f"kipp-{prefix}{p}", ours + ["--precision", p]) for p in ("fp32", "bf16")],
            [Variant(f"pytorch-{prefix}fp32", theirs), Variant(f"pytorch-{prefix}bf16-autocast",
                                                                theirs + ["--autocast-bf16"])])


def pretrain_case(args, work, name, seq, batch, steps):
    torch_config = os.path.join(work, f"{name}.json")

    def write_torch_config(run):  # the first Kipp run gives the dimensions PyTorch builds
        with open(torch_config, "w") as f:
            json.dump(hf_config(run["model"]), f)

    ours, theirs = train_variants(args, f"configs/{name}.yaml", seq, batch, steps, torch_config, VOCAB)
    ours[0].after_first = write_torch_config
    variants = ours + theirs
    results = measure(f"{name} seq {seq}", variants, args.repeats)
    if results["pytorch-fp32"]["runs"][0]["parameters"] != results["kipp-fp32"]["runs"][0]["model"]["parameters"]:
        sys.exit(f"train_vs_torch: {name}: PyTorch and Kipp have different parameter counts")
    case = {"config": f"configs/{name}.yaml", "model": results["kipp-fp32"]["runs"][0]["model"], "seq": seq,
            "batch": batch, "tokens_per_step": batch * seq, "timed_steps_per_run": steps, "repeats": args.repeats,
            "variants": results, "ratios": precision_ratios(results, "")}
    commands = {v.name: " ".join(v.command).replace(torch_config, f"<{name} dims as HF config.json>")
                for v in variants}
    return case, commands


def finetune_case(args, work, name, seq, batch, steps):
    hf_folder = os.path.join(args.models, f"{name}-hf")
    torch_config = os.path.join(hf_folder, "config.json")
    with open(torch_config) as f:
        hf = json.load(f)
    kipp_config = os.path.join(work, f"{name}.yaml")
    with open(kipp_config, "w") as f:
        f.write(model_section(hf))
    ours, theirs = train_variants(args, kipp_config, seq, batch, steps, torch_config, hf["vocab_size"], "full-")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))  # lora_bench takes OpenMP's default

    def lora(variant, base, precision, extra=()):
        return Variant(variant, [args.lora_bench, os.path.join(args.models, f"{name}-{base}.gguf"), "--rank",
                                 str(LORA_RANK), "--batch", str(batch), "--seq", str(seq), "--steps", str(steps),
                                 "--precision", precision, *extra, "--json"], env)

    theirs_lora = [PYTHON, REFERENCE, "bench", "--full-step", "--lora-rank", str(LORA_RANK), "--config",
                   torch_config, "--batch-size", str(batch), "--seq-len", str(seq), "--iterations", str(steps),
                   "--threads", str(args.threads)]
    variants = ours + theirs + [
        lora("kipp-lora-fp32", "bf16", "fp32"), lora("kipp-lora-bf16", "bf16", "bf16"),
        lora("kipp-qlora-affine4-bf16", "affine4", "bf16"),
        # The shipped LoRA config recomputes each layer's activations: its memory, at the same step.
        lora("kipp-lora-bf16-recompute", "bf16", "bf16", ["--recompute"]),
        lora("kipp-qlora-affine4-bf16-recompute", "affine4", "bf16", ["--recompute"]),
        Variant("pytorch-lora-fp32", theirs_lora), Variant("pytorch-lora-bf16-autocast",
                                                           theirs_lora + ["--autocast-bf16"])]
    r = measure(f"{name} seq {seq}", variants, args.finetune_repeats)
    if r["pytorch-full-fp32"]["runs"][0]["parameters"] != r["kipp-full-fp32"]["runs"][0]["model"]["parameters"]:
        sys.exit(f"train_vs_torch: {name}: PyTorch and Kipp have different parameter counts")
    if r["pytorch-lora-fp32"]["runs"][0]["trained_parameters"] != r["kipp-lora-fp32"]["runs"][0]["adapter_parameters"]:
        sys.exit(f"train_vs_torch: {name}: PyTorch and Kipp have different adapter parameter counts")

    full_best, full_tps = best_of(r, ["kipp-full-fp32", "kipp-full-bf16"])
    lora_best, lora_tps = best_of(r, ["kipp-lora-fp32", "kipp-lora-bf16"])
    torch_lora_best, torch_lora_tps = best_of(r, ["pytorch-lora-fp32", "pytorch-lora-bf16-autocast"])
    torch_full_best, torch_full_tps = best_of(r, ["pytorch-full-fp32", "pytorch-full-bf16-autocast"])

    def rss(variant):
        return r[variant]["peak_rss_mib"]["max"]

    lora_limit = TARGETS["lora_bf16_base_peak_rss_gb_at_most"] * MIB_PER_GB
    qlora_limit = TARGETS["qlora_affine4_peak_rss_gb_at_most"] * MIB_PER_GB
    ratios = {
        "full_fine_tune": precision_ratios(r, "full-"),
        "lora_over_full_best_precisions": round(lora_tps / full_tps, 2),
        "lora_over_full_best_precisions_are": [lora_best, full_best],
        "meets_lora_over_full": lora_tps / full_tps >= TARGETS["lora_over_full_at_least"],
        "lora_over_full_fp32": round(median_tps(r, "kipp-lora-fp32") / median_tps(r, "kipp-full-fp32"), 2),
        "lora_over_full_bf16": round(median_tps(r, "kipp-lora-bf16") / median_tps(r, "kipp-full-bf16"), 2),
        "kipp_lora_best_over_pytorch_lora_best": round(lora_tps / torch_lora_tps, 2),
        "kipp_lora_best_over_pytorch_lora_best_are": [lora_best, torch_lora_best],
        "kipp_qlora_over_pytorch_lora_best": round(median_tps(r, "kipp-qlora-affine4-bf16") / torch_lora_tps, 2),
        "kipp_full_best_over_pytorch_full_best": round(full_tps / torch_full_tps, 2),
        "lora_bf16_base_peak_rss_mib": {"without_recompute": rss(lora_best),
                                        "recompute": rss("kipp-lora-bf16-recompute"),
                                        "limit_mib": round(lora_limit, 1)},
        "meets_lora_peak_rss": rss(lora_best) <= lora_limit,
        "meets_lora_peak_rss_with_recompute": rss("kipp-lora-bf16-recompute") <= lora_limit,
        "qlora_affine4_peak_rss_mib": {"without_recompute": rss("kipp-qlora-affine4-bf16"),
                                       "recompute": rss("kipp-qlora-affine4-bf16-recompute"),
                                       "limit_mib": round(qlora_limit, 1)},
        "meets_qlora_peak_rss": rss("kipp-qlora-affine4-bf16") <= qlora_limit,
        "meets_qlora_peak_rss_with_recompute": rss("kipp-qlora-affine4-bf16-recompute") <= qlora_limit,
    }
    case = {"models": {"hf_config": torch_config, "kipp_model_section": model_section(hf),
                       "lora_bases": [f"{name}-bf16.gguf", f"{name}-affine4.gguf"]},
            "model": r["kipp-full-fp32"]["runs"][0]["model"], "seq": seq, "batch": batch,
            "tokens_per_step": batch * seq, "timed_steps_per_run": steps, "repeats": args.finetune_repeats,
            "lora": {"rank": LORA_RANK, "alpha": 2 * LORA_RANK, "targets": "q k v o gate up down",
                     "adapter_parameters": r["kipp-lora-fp32"]["runs"][0]["adapter_parameters"]},
            "variants": r, "ratios": ratios}
    commands = {v.name: " ".join(v.command).replace(kipp_config, f"<{name}-hf/config.json as a model section>")
                for v in variants}
    return case, commands


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-bench", default="build/release/bench/train_bench")
    parser.add_argument("--lora-bench", default="build/release/bench/lora_bench")
    parser.add_argument("--models", default="build/release/models",
                        help="folder with qwen3-0.6b-bf16.gguf, qwen3-0.6b-affine4.gguf and qwen3-0.6b-hf/")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=2, help="runs of each variant of tiny and small")
    parser.add_argument("--finetune-repeats", type=int, default=1, help="runs of each variant of the 0.6b fine-tune")
    parser.add_argument("--only", help="run only CONFIG:SEQ cases, comma-separated (e.g. tiny:256,qwen3-0.6b:256)")
    parser.add_argument("--max-wait", type=int, default=300,
                        help="seconds to wait for the 1-minute load to drop to 1.5 before starting anyway")
    parser.add_argument("--out", default="bench/results/train-cpu.json")
    args = parser.parse_args()
    for tool in (args.train_bench, args.lora_bench):
        if not os.path.exists(tool):
            sys.exit(f"train_vs_torch: {tool} not found (build with -DKIPP_BUILD_BENCH=ON)")
    if not os.path.exists(REFERENCE):
        sys.exit(f"train_vs_torch: run from the repository root ({REFERENCE} not found)")
    check_blas()
    cases = [(pretrain_case, c) for c in PRETRAIN_CASES] + [(finetune_case, FINETUNE_CASE)]
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if f"{c[1][0]}:{c[1][1]}" in wanted]
    quiet = wait_for_quiet(args.max_wait)
    print(f"load: {quiet}", flush=True)
    started = time.monotonic()

    results, commands = {}, {}
    with tempfile.TemporaryDirectory() as work:
        for run_case, (name, seq, batch, steps) in cases:
            key = f"{name}-seq{seq}"
            results[key], commands[key] = run_case(args, work, name, seq, batch, steps)
            print(f"{key}: {json.dumps(results[key]['ratios'])}", flush=True)

    document = {
        "benchmark": "training step tokens/s and peak RSS: Kipp (bench/train_bench, bench/lora_bench) vs PyTorch "
                     "(tools/train_reference.py bench --full-step), same model, batch, threads; FP32 and BF16",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "step": "zero grads + forward/backward (mean cross-entropy, random tokens) + clip grad norm 1.0 + AdamW "
                "(LoRA: on the adapters only); one warm-up step, figure per run = median over its timed steps; "
                "each run a fresh process, the variants of a case alternated (in order, then reversed)",
        "precisions": "kipp fp32 / bf16: train.precision (BF16 operands, FP32 sums, FP32 master weights and AdamW); "
                      "pytorch fp32 / bf16-autocast: torch.autocast('cpu', dtype=torch.bfloat16) around forward "
                      "and loss, FP32 parameters and AdamW",
        "pytorch_model": "tools/train_reference.py: eager modules, attention with an explicit causal score matrix "
                         "(torch 1.13 has no scaled_dot_product_attention), torch.optim.AdamW defaults (no foreach "
                         "on CPU); LoRA: tools/lora_reference.py's LoraLinear on a frozen base (requires_grad "
                         "False; its matrices in BF16 under autocast, FP32 otherwise), adapters FP32",
        "kipp_lora": "bench/lora_bench on a frozen GGUF base (BF16, or affine4 = QLoRA) through the inference "
                     "kernels; the recompute variants (recompute_blocks, as configs/lora-qwen3-0.6b.yaml) are "
                     "there for their memory; the 0.6b full fine-tunes run without recomputation",
        "peak_rss": "getrusage ru_maxrss of the whole process (MiB); for PyTorch that includes the "
                    "interpreter and torch's libraries (peak_rss_mb_before_model in its runs); RSS targets in "
                    "decimal GB, judged on the highest run",
        "ratios": "of median tokens/s",
        "targets": TARGETS,
        "repeats": {"pretrain": args.repeats, "finetune": args.finetune_repeats},
        "vocab_pretrain": VOCAB,
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
    for key, case in results.items():
        print(f"{key}: {'variant':<34}{'tok/s':>9}{'peak MiB':>10}")
        for name, v in case["variants"].items():
            print(f"{'':<{len(key) + 2}}{name:<34}{v['tokens_per_s']['median']:>9.1f}"
                  f"{v['peak_rss_mib']['median']:>10.1f}")
        print(json.dumps(case["ratios"], indent=1))


if __name__ == "__main__":
    main()
