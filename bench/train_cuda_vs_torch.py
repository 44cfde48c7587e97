#!/usr/bin/python3
"""Training throughput, MFU and peak GPU memory of `kipp train --device cuda` against PyTorch on the same card.

The model is configs/<name>.yaml's Qwen3 (RMSNorm, per-head Q/K RMSNorm, rotate-half RoPE,
grouped-query causal attention, SwiGLU, tied head) with a 32000-token vocabulary. PyTorch's is
defined in plain PyTorch with the fused attention of scaled_dot_product_attention; each step:
zero the gradients, forward and backward of the mean cross-entropy over random tokens, clip the
gradient norm to 1.0, AdamW (fused=True), FP32 master weights under BF16 autocast; eager, then
under torch.compile (when it compiles on this machine; the error is recorded when not).
Kipp's is `kipp train --device cuda --config configs/<name>.yaml` on the same shape, on a
generated text corpus with a byte-level tokenizer (`kipp tokenizer train --byte-level`, 263 ids:
made in no time; model.vocab_size stays 32000, and kipp train accepts a tokenizer with fewer ids
than the model's vocabulary), one micro-batch per step, no evaluation; its tokens/s is read from
the run's metrics.jsonl (log.every 1: each step line's tokens_per_second), its peak GPU memory
from the NVML fields of the same lines (gpu_memory_peak_bytes: the process's memory as NVML
sees it, the CUDA context included). The run is killed once it has logged enough steps, so no
checkpoint is written.

Cases: tiny (micro-batch 8 x 256), small (the KitAI config, 16 x 512), medium (8 x 1024, with
train.recompute_blocks off as on the PyTorch side), and small_6gb (the 6 GB recipe: small at
8 x 512 with train.recompute_blocks on; Kipp only, its peak GPU memory against 6 GiB).
tokens/s is the median over the timed steps after the warm-up; MFU counts 6 x parameters + the
attention's 12 x layers x seq x q_width / 2 FLOPs per token against --peak-tflops (the card's
dense BF16 peak; default: the H100 SXM's 989). The measurements run in a fixed order of
priority (the small config's first, the compiles of tiny and medium last), each under its own
timeout, none started with too little of --budget-s left; the JSON is rewritten after each one.
The exit status is 1 when a Kipp measurement failed (its error line is in the JSON), else 0.

--dry-run (no GPU needed): the PyTorch model for one step on the CPU (its attention against the
spelled-out one), `kipp train --device cpu` for a few steps on the tiny case's inputs (the
metrics parsing), and every case's `kipp train --device cuda` command line, which must get as
far as the device check (the config and overrides are valid).

Usage: bench/train_cuda_vs_torch.py [--kipp build/release/kipp] [--cases small,small_6gb,tiny,medium]
           [--steps 20] [--warmup 5] [--peak-tflops 989] [--budget-s 150] [--work DIR]
           [--out bench/results/train-cuda.json] [--dry-run]
"""
import argparse
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time

VOCAB = 32000
GIB = 1 << 30
# name: (config, micro-batch, seq_len, Kipp's extra overrides, whether PyTorch runs it)
CASES = {
    "small": ("small", 16, 512, [], True),
    "small_6gb": ("small", 8, 512, ["train.recompute_blocks=true"], False),
    "tiny": ("tiny", 8, 256, [], True),
    "medium": ("medium", 8, 1024, ["train.recompute_blocks=false"], True),
}
# The measurements in order of priority: (case, variant).
PLAN = [("small", "kipp"), ("small", "torch_eager"), ("small", "torch_compile"), ("small_6gb", "kipp"),
        ("tiny", "kipp"), ("tiny", "torch_eager"), ("medium", "kipp"), ("medium", "torch_eager"),
        ("tiny", "torch_compile"), ("medium", "torch_compile")]
# Per variant: the timeout of one measurement, and the least budget left to start one.
TIMEOUT_S = {"kipp": 60, "torch_eager": 40, "torch_compile": 120}
MIN_START_S = {"kipp": 15, "torch_eager": 10, "torch_compile": 60}
CORPUS_BYTES = 1 << 20
# The issue's targets: (what, bound, which way is better, the figure: case, key).
TARGETS = [
    ("small 16x512: Kipp / PyTorch eager tokens/s", 1.3, "higher", ("small", "kipp_over_torch_eager")),
    ("small 16x512: Kipp / torch.compile tokens/s", 1.0, "higher", ("small", "kipp_over_torch_compile")),
    ("small 8x512 with recompute_blocks: Kipp peak GPU memory, GiB", 6.0, "lower", ("small_6gb", "kipp_peak_gib")),
]

def model_section(path):
    """The model keys of a Kipp training config (flat `key: value` lines under `model:`)."""
    dims, inside = {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.split("#", 1)[0].rstrip()
            if not text:
                continue
            if not text.startswith(" "):
                inside = text.strip() == "model:"
                continue
            if inside and ":" in text:
                key, value = (part.strip() for part in text.split(":", 1))
                dims[key] = value
    return {
        "hidden": int(dims["d_model"]), "layers": int(dims["n_layers"]), "heads": int(dims["n_heads"]),
        "kv_heads": int(dims["n_kv_heads"]),
        "head_dim": int(dims["head_dim"]) if dims.get("head_dim", "auto") != "auto"
        else int(dims["d_model"]) // int(dims["n_heads"]),
        "ffn": int(dims["d_ff"]), "eps": float(dims.get("norm_eps", 1e-6)),
        "theta": float(dims.get("rope_theta", 10000.0)),  # the config's defaults when left out
    }


def causal_attention(torch, q, k, v):
    """softmax(q k^T / sqrt(d) + causal mask) v, spelled out: for a torch without
    scaled_dot_product_attention (the dry run's may be older), and its check where it has one."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")).float(), dim=-1).to(v.dtype) @ v


def build_torch_model(torch, dims, vocab, seq):
    nn, F = torch.nn, torch.nn.functional
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class RMSNorm(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            return self.weight * (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + dims["eps"])).to(x.dtype)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h, hd = dims["hidden"], dims["head_dim"]
            self.input_layernorm = RMSNorm(h)
            self.q_proj = nn.Linear(h, dims["heads"] * hd, bias=False)
            self.k_proj = nn.Linear(h, dims["kv_heads"] * hd, bias=False)
            self.v_proj = nn.Linear(h, dims["kv_heads"] * hd, bias=False)
            self.o_proj = nn.Linear(dims["heads"] * hd, h, bias=False)
            self.q_norm = RMSNorm(hd)
            self.k_norm = RMSNorm(hd)
            self.post_attention_layernorm = RMSNorm(h)
            self.gate_proj = nn.Linear(h, dims["ffn"], bias=False)
            self.up_proj = nn.Linear(h, dims["ffn"], bias=False)
            self.down_proj = nn.Linear(dims["ffn"], h, bias=False)

        def forward(self, x, cos, sin):
            b, t, _ = x.shape
            hd = dims["head_dim"]
            n = self.input_layernorm(x)
            q = self.q_norm(self.q_proj(n).view(b, t, dims["heads"], hd)).transpose(1, 2)
            k = self.k_norm(self.k_proj(n).view(b, t, dims["kv_heads"], hd)).transpose(1, 2)
            v = self.v_proj(n).view(b, t, dims["kv_heads"], hd).transpose(1, 2)
            q = q * cos + torch.cat((-q[..., hd // 2:], q[..., :hd // 2]), dim=-1) * sin
            k = k * cos + torch.cat((-k[..., hd // 2:], k[..., :hd // 2]), dim=-1) * sin
            group = dims["heads"] // dims["kv_heads"]
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            a = sdpa(q, k, v, is_causal=True) if sdpa else causal_attention(torch, q, k, v)
            x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, dims["heads"] * hd))
            n = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(n)) * self.up_proj(n))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, dims["hidden"])
            self.layers = nn.ModuleList(Block() for _ in range(dims["layers"]))
            self.norm = RMSNorm(dims["hidden"])
            hd = dims["head_dim"]
            inv_freq = dims["theta"] ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
            angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
            angles = torch.cat([angles, angles], dim=1)
            self.register_buffer("cos", angles.cos().float(), persistent=False)
            self.register_buffer("sin", angles.sin().float(), persistent=False)

        def forward(self, inputs, targets):
            x = self.embed_tokens(inputs)
            for layer in self.layers:
                x = layer(x, self.cos, self.sin)
            logits = self.norm(x) @ self.embed_tokens.weight.t()
            return F.cross_entropy(logits.float().view(-1, vocab), targets.view(-1))

    model = Model()
    for module in model.modules():  # Kipp's initialization (model.init_std 0.02); the norm gains stay 1
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
    return model


def flops_per_token(dims, vocab, seq):
    h, hd, layers = dims["hidden"], dims["head_dim"], dims["layers"]
    q_width, kv_width = dims["heads"] * hd, dims["kv_heads"] * hd
    params = vocab * h + layers * (h * (q_width + 2 * kv_width) + q_width * h + 3 * h * dims["ffn"])
    # 6 per parameter (forward 2, backward 4); causal attention's QK^T and PV over half the keys on average.
    return 6 * params + 12 * layers * seq * q_width / 2


class Timeout(Exception):
    pass


def alarm(seconds):
    """Raises Timeout in the main thread after `seconds` (0: cancels)."""
    def fire(signum, frame):
        raise Timeout(f"timed out after {seconds} s")
    signal.signal(signal.SIGALRM, fire)
    signal.alarm(max(0, int(seconds)))


def torch_run(torch, dims, batch, seq, steps, warmup, compiled, device):
    torch.manual_seed(0)
    on_gpu = device.type == "cuda"
    model = build_torch_model(torch, dims, VOCAB, seq).to(device)
    fused = {"fused": True} if on_gpu else {}  # the dry run's CPU torch may not have a fused AdamW
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, **fused)
    forward = torch.compile(model) if compiled else model
    inputs = torch.randint(0, VOCAB, (batch, seq), device=device)
    targets = torch.randint(0, VOCAB, (batch, seq), device=device)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(warmup + steps):
        sync()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_gpu):
            loss = forward(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        sync()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    run = {"step_s_median": step_s, "step_s_min": min(times), "step_s_max": max(times),
           "tokens_per_s": batch * seq / step_s, "final_loss": float(loss.item())}
    if on_gpu:
        run["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        run["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return run


def make_inputs(kipp, work):
    """The byte-level tokenizer and a generated corpus of CORPUS_BYTES (fixed seed) under work."""
    os.makedirs(os.path.join(work, "tokenizer"), exist_ok=True)
    tokenizer = os.path.join(work, "tokenizer", "tokenizer.json")
    subprocess.run([kipp, "tokenizer", "train", "--byte-level", "-q", "-o", tokenizer], check=True,
                   stdout=subprocess.DEVNULL)
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    lines, size = [], 0
    while size < CORPUS_BYTES:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))).capitalize() + ".\n"
        lines.append(line)
        size += len(line)
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("".join(lines))
    return tokenizer, corpus


def kipp_command(kipp, name, device, batch, seq, max_steps, tokenizer, corpus, work):
    config, _, _, extra, _ = CASES[name]
    sets = [f"tokenizer={tokenizer}", f"data.train=[{corpus}]", f"model.vocab_size={VOCAB}",
            f"train.seq_len={seq}", f"train.micro_batch={batch}", "train.grad_accum=1", f"train.max_steps={max_steps}",
            "data.validation_fraction=0", "eval.every=0", "checkpoint.every=0", "log.every=1",
            f"data.cache_dir={os.path.join(work, 'data-cache')}", f"run.dir={os.path.join(work, 'run-' + name)}"] + extra
    cmd = [kipp, "train", "--config", f"configs/{config}.yaml", "--device", device, "--plain"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def read_steps(metrics_path):
    """The "step" records of a metrics.jsonl, in order (an unfinished last line is left out)."""
    steps = []
    try:
        with open(metrics_path, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("type") == "step":
                    steps.append(record)
    except OSError:
        pass
    return steps


def error_line(log_path):
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return "no log"
    errors = [l for l in lines if "error" in l.lower()]
    return (errors or lines or ["no output"])[-1][:300]


def kipp_figures(steps, warmup, batch, seq):
    """tokens/s (median over the steps after the warm-up) and the NVML figures of the step lines."""
    timed = [s["tokens_per_second"] for s in steps[warmup:] if isinstance(s.get("tokens_per_second"), (int, float))]
    if not timed:
        return None
    run = {"tokens_per_s": statistics.median(timed), "tokens_per_s_min": min(timed), "tokens_per_s_max": max(timed),
           "timed_steps": len(timed), "step_s_median": batch * seq / statistics.median(timed),
           "final_loss": steps[-1].get("loss")}
    peaks = [s["gpu_memory_peak_bytes"] for s in steps if isinstance(s.get("gpu_memory_peak_bytes"), int)]
    if peaks:
        run["peak_gpu_memory_bytes"] = max(peaks)
        run["gpu_memory_scope"] = steps[-1].get("gpu_memory_scope")
        run["gpu_name"] = steps[-1].get("gpu_name")
    return run


def kipp_run(cmd, run_dir, log_path, want_steps, warmup, batch, seq, timeout_s):
    """Runs cmd until its metrics.jsonl holds want_steps step lines (then kills it), it exits, or
    timeout_s passes; the figures of the steps it logged."""
    shutil.rmtree(run_dir, ignore_errors=True)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        cut = None
        while True:
            steps = read_steps(metrics)
            if len(steps) >= want_steps:
                break
            if proc.poll() is not None:
                break
            if time.monotonic() - start > timeout_s:
                cut = f"stopped at the {timeout_s} s timeout after {len(steps)} steps"
                break
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    steps = read_steps(metrics)[:want_steps]
    if len(steps) < want_steps and cut is None:
        return {"error": error_line(log_path), "exit": proc.returncode, "logged_steps": len(steps)}
    run = kipp_figures(steps, warmup, batch, seq)
    if run is None:
        return {"error": cut or "no timed steps", "logged_steps": len(steps)}
    run["seconds"] = round(time.monotonic() - start, 1)
    if cut:
        run["note"] = cut
    return run


def write(path, result):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def evaluate(result):
    """Ratios per case and the issue's targets, each with its value (None: not measured) and verdict."""
    for case in result["cases"].values():
        runs = case["runs"]
        kipp = (runs.get("kipp") or {}).get("tokens_per_s")
        case["kipp_over_torch_eager"] = ratio(kipp, (runs.get("torch_eager") or {}).get("tokens_per_s"))
        case["kipp_over_torch_compile"] = ratio(kipp, (runs.get("torch_compile") or {}).get("tokens_per_s"))
        peak = (runs.get("kipp") or {}).get("peak_gpu_memory_bytes")
        case["kipp_peak_gib"] = peak / GIB if peak is not None else None
        for run in runs.values():
            if "tokens_per_s" in run:
                run["mfu"] = run["tokens_per_s"] * case["flops_per_token"] / (result["peak_tflops"] * 1e12)
    result["targets"] = []
    for what, bound, better, (name, key) in TARGETS:
        value = result["cases"].get(name, {}).get(key)
        met = None if value is None else (value >= bound if better == "higher" else value <= bound)
        result["targets"].append({"what": what, "target": bound, "better": better, "value": value, "met": met})


def case_line(name, case):
    """One case's Kipp figures in a few words, for the last lines of the output."""
    def fmt(x, spec):
        return "-" if x is None else format(x, spec)
    kipp = case["runs"].get("kipp", {})
    if "tokens_per_s" not in kipp:
        why = kipp.get("error") or kipp.get("skipped") or "not run"
        return f"{name}: kipp {why.removeprefix('kipp: error: ')}"
    memory = kipp.get("peak_gpu_memory_bytes")
    return (f"{name}: kipp {kipp['tokens_per_s']:.0f} tok/s, x{fmt(case['kipp_over_torch_eager'], '.2f')} eager, "
            f"x{fmt(case['kipp_over_torch_compile'], '.2f')} compile, peak {fmt(memory and memory / GIB, '.2f')} GiB")


def measure(args, torch, result, name, variant, deadline, inputs):
    config, batch, seq, _, _ = CASES[name]
    case = result["cases"].setdefault(name, None)
    if case is None:
        dims = model_section(f"configs/{config}.yaml")
        case = result["cases"][name] = {"config": f"configs/{config}.yaml", "batch": batch, "seq_len": seq,
                                        "kipp_sets": CASES[name][3], "model": dims,
                                        "flops_per_token": flops_per_token(dims, VOCAB, seq), "runs": {}}
    left = deadline - time.monotonic()
    if left < MIN_START_S[variant]:
        case["runs"][variant] = {"skipped": f"{left:.0f} s of the budget left"}
        return
    limit = min(TIMEOUT_S[variant], left - 2)
    started = time.monotonic()
    if variant == "kipp":
        tokenizer, corpus = inputs
        want = args.warmup + args.steps
        cmd = kipp_command(args.kipp, name, "cuda", batch, seq, 100000, tokenizer, corpus, args.work)
        run = kipp_run(cmd, os.path.join(args.work, "run-" + name), os.path.join(args.work, f"kipp-{name}.log"),
                       want, args.warmup, batch, seq, limit)
        run["command"] = " ".join(cmd)
    else:
        try:
            alarm(limit)
            run = torch_run(torch, case["model"], batch, seq, args.steps, args.warmup, variant == "torch_compile",
                            torch.device("cuda"))
        except Exception as e:  # a compile that fails (no Triton, no compiler), out of memory, the timeout
            run = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        finally:
            alarm(0)
        if variant == "torch_compile":
            torch._dynamo.reset()
        torch.cuda.empty_cache()
        run.setdefault("seconds", round(time.monotonic() - started, 1))
    case["runs"][variant] = run
    print(f"{name} {variant}: {json.dumps(run)}", file=sys.stderr, flush=True)


def dry_run(args, torch):
    """The parts that run without a GPU; fails (exit 1) where one does not."""
    result = {"dry_run": True, "torch": torch.__version__, "checks": {}}
    problems = []
    help_text = subprocess.run([args.kipp, "train", "--help"], capture_output=True, text=True, check=False).stdout
    missing = [flag for flag in ("--config", "--set", "--device", "--plain") if flag not in help_text]
    if missing:
        problems.append(f"kipp train --help has no {' '.join(missing)}")
    # The PyTorch model, one step on the CPU; its attention against the spelled-out one.
    dims = model_section("configs/tiny.yaml")
    run = torch_run(torch, dims, 2, 32, 1, 0, False, torch.device("cpu"))
    result["checks"]["torch_cpu_step"] = run
    if not 0.9 * math.log(VOCAB) < run["final_loss"] < 1.1 * math.log(VOCAB):
        problems.append(f"the PyTorch model's first loss {run['final_loss']} is not near ln({VOCAB})")
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        q, k, v = (torch.randn(2, 4, 32, 64, dtype=torch.float64) for _ in range(3))
        err = (torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
               - causal_attention(torch, q, k, v)).abs().max().item()
        result["checks"]["sdpa_vs_spelled_out_max_abs"] = err
        if err > 1e-9:
            problems.append(f"scaled_dot_product_attention differs from the spelled-out attention by {err}")
    tokenizer, corpus = make_inputs(args.kipp, args.work)
    # kipp train on the CPU at a small shape: the command line and the metrics parsing.
    cmd = kipp_command(args.kipp, "tiny", "cpu", 2, 32, 100000, tokenizer, corpus, args.work)
    run = kipp_run(cmd, os.path.join(args.work, "run-tiny"), os.path.join(args.work, "kipp-cpu.log"), 3, 1, 2, 32, 120)
    result["checks"]["kipp_cpu_steps"] = run
    if "tokens_per_s" not in run:
        problems.append(f"kipp train --device cpu: {run.get('error')}")
    # Every case's GPU command line gets as far as the device check.
    for name in args.cases:
        _, batch, seq, _, _ = CASES[name]
        cmd = kipp_command(args.kipp, name, "cuda", batch, seq, 100000, tokenizer, corpus, args.work)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
        line = next((l for l in (out.stdout + out.stderr).splitlines() if "train.device: cuda" in l), None)
        result["checks"][f"device_check_{name}"] = line or (out.stdout + out.stderr).strip()[-300:]
        if out.returncode == 0 or line is None:
            problems.append(f"{name}: the cuda command line did not stop at the device check")
    result["problems"] = problems
    write(args.out, result)
    print(json.dumps(result["checks"], indent=1))
    print(f"dry run: {len(problems)} problem(s){': ' + '; '.join(problems) if problems else ''}")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kipp", default="build/release/kipp")
    parser.add_argument("--cases", default="small,small_6gb,tiny,medium")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the card's dense BF16 peak")
    parser.add_argument("--budget-s", type=float, default=150.0, help="no measurement starts after this")
    parser.add_argument("--work", default="/tmp/kipp-train-cuda-bench", help="scratch folder (runs, corpus)")
    parser.add_argument("--out", default="bench/results/train-cuda.json")
    parser.add_argument("--dry-run", action="store_true", help="check what runs without a GPU")
    args = parser.parse_args()
    args.cases = args.cases.split(",")
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    deadline = time.monotonic() + args.budget_s
    args.kipp = os.path.abspath(args.kipp) if os.sep in args.kipp else args.kipp
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)

    import torch  # the GPU machine's; imported here so --help works anywhere
    if args.dry_run:
        return dry_run(args, torch)
    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device", file=sys.stderr)
        return 77
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "peak_tflops": args.peak_tflops,
              "vocab": VOCAB, "steps": args.steps, "warmup": args.warmup, "budget_s": args.budget_s, "cases": {}}
    inputs = make_inputs(args.kipp, args.work)
    for name, variant in PLAN:
        if name not in args.cases or (variant != "kipp" and not CASES[name][4]):
            continue
        measure(args, torch, result, name, variant, deadline, inputs)
        evaluate(result)
        write(args.out, result)
    failed = [f"{n} {v}" for n, c in result["cases"].items() for v, r in c["runs"].items()
              if v == "kipp" and "error" in r]
    for t in result["targets"]:
        verdict = "not measured" if t["met"] is None else ("met" if t["met"] else "missed")
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        print(f"target {t['what']}: {value} (target {t['target']}, {t['better']} is better) {verdict}")
    print("; ".join(case_line(n, c) for n, c in result["cases"].items()))
    if failed:
        print(f"{len(failed)} Kipp measurement(s) failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
