#!/usr/bin/env python3
"""cuda_torch_anchor.py: PyTorch's speed on the same Qwen3 weights, the anchor for `kipp bench --backend cuda`.

Loads a Hugging-Face-layout Qwen3 folder (the synthetic checkpoint the benchmarked GGUF is
converted from) in BF16 on the GPU and runs a plain-PyTorch Qwen3 forward written here (per-head
q/k RMSNorm, rotate-half RoPE, grouped-query attention through scaled_dot_product_attention (K/V heads repeated),
SwiGLU MLP, tied head) with a static K/V cache, as Hugging Face's generate() does with
cache_implementation="static": one preallocated cache per sequence, keys written at their
positions, attention over the whole cache under a position mask. Written against torch alone, so
the anchor does not depend on a transformers version. Measured, eager and then under
torch.compile (a failed compile is recorded, not fatal):
  prefill   one sequence of each --prefill length, tokens/s;
  decode    --batches sequences after a --prompt-len prompt, greedy, tokens/s over all sequences.
Timing: CUDA events around each call after warm-up, median of the repeats. The prompts are
random token ids (never zeros). The JSON is rewritten after every measurement, so a run stopped
by its time budget keeps what it measured.

Usage: cuda_torch_anchor.py --model HF_DIR --out FILE.json [options]
       cuda_torch_anchor.py --dry-run --model TINY_HF_DIR --out FILE.json   (CPU, small sizes)
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from torch_reference import Checkpoint, RefError, model_dims  # noqa: E402
from torch_reference import forward as reference_forward  # noqa: E402

# Ids the Qwen tokenizer defines; the synthetic embedding's rows above it are scaled down.
PROMPT_ID_LIMIT = 151643


class AnchorError(Exception):
    """An error reported as one line with a non-zero exit."""


def load_weights(model_dir, device, dtype):
    """The checkpoint's tensors on `device` in `dtype`, with the dims of config.json."""
    try:
        ckpt = Checkpoint(model_dir)
        dims = model_dims(ckpt.config)

        def t(name, shape):
            return ckpt.tensor(name, shape).to(device=device, dtype=dtype)

        h, hd, nh, nkv, ffn = dims["hidden"], dims["head_dim"], dims["heads"], dims["kv_heads"], dims["ffn"]
        w = {"embed": t("model.embed_tokens.weight", (dims["vocab"], h)),
             "norm": t("model.norm.weight", (h,)), "layers": []}
        w["head"] = w["embed"] if dims["tied"] else t("lm_head.weight", (dims["vocab"], h))
        for i in range(dims["layers"]):
            p = f"model.layers.{i}."
            w["layers"].append({
                "in_norm": t(p + "input_layernorm.weight", (h,)),
                "q": t(p + "self_attn.q_proj.weight", (nh * hd, h)),
                "k": t(p + "self_attn.k_proj.weight", (nkv * hd, h)),
                "v": t(p + "self_attn.v_proj.weight", (nkv * hd, h)),
                "q_norm": t(p + "self_attn.q_norm.weight", (hd,)),
                "k_norm": t(p + "self_attn.k_norm.weight", (hd,)),
                "o": t(p + "self_attn.o_proj.weight", (h, nh * hd)),
                "post_norm": t(p + "post_attention_layernorm.weight", (h,)),
                "gate": t(p + "mlp.gate_proj.weight", (ffn, h)),
                "up": t(p + "mlp.up_proj.weight", (ffn, h)),
                "down": t(p + "mlp.down_proj.weight", (h, ffn)),
            })
    except RefError as e:
        raise AnchorError(str(e))
    tensors = [w["embed"], w["norm"], w["head"]] + [t for layer in w["layers"] for t in layer.values()]
    mark_static(tensors)
    return w, dims


def mark_static(tensors):
    """Tells torch.compile's CUDA graphs that these tensors keep their addresses, so a replay reads
    them in place instead of copying them into the graph's own input buffers (a copy of every
    weight per decode step)."""
    mark = getattr(getattr(torch, "_dynamo", None), "mark_static_address", None)
    if mark is not None:
        for t in tensors:
            mark(t)


def rms_norm(x, weight, eps):
    """Hugging Face's Qwen3RMSNorm: the statistics in float32, the product in the weight's type."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(weight.dtype)


def attention(q, k, v, mask):
    """scaled_dot_product_attention where torch has it (2.0 on); spelled out for older CPU-only torch."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class StaticQwen3:
    """A Qwen3 forward over a static K/V cache of [batch, kv_heads, max_len, head_dim] per layer."""

    def __init__(self, weights, dims, batch, max_len, device, dtype):
        self.w, self.d = weights, dims
        self.batch, self.max_len = batch, max_len
        nkv, hd = dims["kv_heads"], dims["head_dim"]
        self.k_cache = [torch.zeros(batch, nkv, max_len, hd, device=device, dtype=dtype) for _ in weights["layers"]]
        self.v_cache = [torch.zeros(batch, nkv, max_len, hd, device=device, dtype=dtype) for _ in weights["layers"]]
        inv_freq = 1.0 / (dims["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        self.cos = ang.cos().to(device=device, dtype=torch.float32)
        self.sin = ang.sin().to(device=device, dtype=torch.float32)
        self.key_pos = torch.arange(max_len, device=device)
        mark_static(self.k_cache + self.v_cache + [self.cos, self.sin, self.key_pos])

    def forward(self, ids, positions):
        """ids [batch, T], positions [T] (the same for every sequence): greedy next ids [batch]."""
        return self.logits(ids, positions).argmax(dim=-1)

    def logits(self, ids, positions):
        """The last position's logits [batch, vocab]; writes the K/V of `positions` into the cache."""
        d = self.d
        b, n = ids.shape
        nh, nkv, hd, eps = d["heads"], d["kv_heads"], d["head_dim"], d["eps"]
        x = self.w["embed"][ids]
        cos = self.cos[positions][None, None].to(x.dtype)
        sin = self.sin[positions][None, None].to(x.dtype)
        mask = self.key_pos[None, :] <= positions[:, None]  # [T, max_len], True where attended
        for layer, kc, vc in zip(self.w["layers"], self.k_cache, self.v_cache):
            h = rms_norm(x, layer["in_norm"], eps)
            q = (h @ layer["q"].T).view(b, n, nh, hd)
            k = (h @ layer["k"].T).view(b, n, nkv, hd)
            v = (h @ layer["v"].T).view(b, n, nkv, hd).transpose(1, 2)
            q = rms_norm(q, layer["q_norm"], eps).transpose(1, 2)
            k = rms_norm(k, layer["k_norm"], eps).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            kc.index_copy_(2, positions, k)
            vc.index_copy_(2, positions, v)
            # K/V heads repeated for their query heads, as Hugging Face's repeat_kv does under a mask.
            a = attention(q, kc.repeat_interleave(nh // nkv, dim=1), vc.repeat_interleave(nh // nkv, dim=1), mask)
            x = x + a.transpose(1, 2).reshape(b, n, nh * hd) @ layer["o"].T
            h = rms_norm(x, layer["post_norm"], eps)
            x = x + (F.silu(h @ layer["gate"].T) * (h @ layer["up"].T)) @ layer["down"].T
        last = rms_norm(x[:, -1], self.w["norm"], eps)
        return last @ self.w["head"].T


class Clock:
    """Seconds one call takes: CUDA events on a GPU, the host clock on the CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def time(self, fn):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3, out
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out


def stats(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def random_ids(gen, batch, n, device):
    return torch.randint(0, PROMPT_ID_LIMIT, (batch, n), generator=gen).to(device)


def step_fn(model, compiled):
    """model.forward, or its torch.compile'd form (CUDA graphs on a GPU)."""
    if not compiled:
        return model.forward
    # Each measurement's model is a new object, so the same forward compiles once per measurement.
    cfg = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, key):
            setattr(cfg, key, max(getattr(cfg, key), 64))
    fn = torch.compile(model.forward, mode="reduce-overhead" if model.cos.is_cuda else "default",
                       fullgraph=False, dynamic=False)
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

    def call(ids, positions):
        if mark_step is not None:
            mark_step()
        return fn(ids, positions).clone()  # a graph replay overwrites its outputs

    return call


def measure_prefill(args, w, dims, n, compiled, clock, device, dtype):
    model = StaticQwen3(w, dims, 1, n, device, dtype)
    fn = step_fn(model, compiled)
    gen = torch.Generator().manual_seed(n)
    positions = torch.arange(n, device=device)
    prompts = [random_ids(gen, 1, n, device) for _ in range(args.repeats + args.warmup)]
    times = []
    t_first = None
    for i, ids in enumerate(prompts):
        sec, _ = clock.time(lambda: fn(ids, positions))
        if i == 0:
            t_first = sec
        if i >= args.warmup:
            times.append(sec)
    s = stats(times)
    return {"tokens": n, "seconds": s, "tokens_per_second": n / s["median"], "first_call_seconds": t_first}


def measure_decode(args, w, dims, batch, compiled, clock, device, dtype):
    steps = args.warmup + args.gen
    # The cache rounded up to 64 positions keeps the attention mask's rows aligned for the fused kernels.
    model = StaticQwen3(w, dims, batch, -(-(args.prompt_len + steps) // 64) * 64, device, dtype)
    gen = torch.Generator().manual_seed(1000 + batch)
    ids = random_ids(gen, batch, args.prompt_len, device)
    prefill_s, nxt = clock.time(lambda: model.forward(ids, torch.arange(args.prompt_len, device=device)))
    fn = step_fn(model, compiled)
    times = []
    tokens = []
    t_first = None
    for i in range(steps):
        pos = torch.tensor([args.prompt_len + i], device=device)
        cur = nxt[:, None]
        sec, nxt = clock.time(lambda: fn(cur, pos))
        if i == 0:
            t_first = sec
        if i >= args.warmup:
            times.append(sec)
        tokens.append(nxt[0].item())
    s = stats(times)
    return {"sequences": batch, "prompt_tokens": args.prompt_len, "timed_steps": args.gen,
            "step_seconds": s, "tokens_per_second": batch / s["median"],
            "first_step_seconds": t_first, "prefill_seconds": prefill_s, "sequence0_tokens": tokens}


def check_against_reference(model_dir, w, dims):
    """The model code (float32 on the CPU) against tools/torch_reference.py's forward: the logits of a
    whole prompt, and of its last token decoded from the cache after the rest, as NMSE."""
    ids = [9707, 11, 1879, 0, 151644, 77, 1000, 5, 13]
    n = len(ids)
    ref, _ = reference_forward(Checkpoint(model_dir), ids)
    cpu = torch.device("cpu")
    full = StaticQwen3(w, dims, 1, n, cpu, torch.float32).logits(torch.tensor([ids]), torch.arange(n))[0]
    cached = StaticQwen3(w, dims, 1, n, cpu, torch.float32)
    cached.logits(torch.tensor([ids[:-1]]), torch.arange(n - 1))
    step = cached.logits(torch.tensor([ids[-1:]]), torch.tensor([n - 1]))[0]

    def nmse(x):
        return float(((x - ref) ** 2).mean() / (ref ** 2).mean())

    return {"prefill_nmse": nmse(full), "decode_nmse": nmse(step),
            "argmax_equal": int(full.argmax()) == int(ref.argmax()) == int(step.argmax())}


def machine_facts(device):
    facts = {"torch": torch.__version__, "python": platform.python_version(), "device": str(device)}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        facts.update({"gpu": p.name, "gpu_memory_bytes": p.total_memory, "multiprocessors": p.multi_processor_count,
                       "capability": f"{p.major}.{p.minor}", "cuda": torch.version.cuda})
    else:
        facts.update({"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads()})
    return facts


def write_json(path, doc):
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def parse_list(text, name):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise AnchorError(f"{name}: '{text}' is not a comma-separated list of integers")
    if not vals or min(vals) < 1:
        raise AnchorError(f"{name}: needs positive integers, got '{text}'")
    return vals


def parse_args(argv):
    p = argparse.ArgumentParser(prog="cuda_torch_anchor.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, metavar="HF_DIR", help="Qwen3 folder (config.json, safetensors)")
    p.add_argument("--out", required=True, metavar="FILE", help="result JSON (rewritten after each measurement)")
    p.add_argument("--prefill", default="512,2048", help="prefill lengths, comma-separated (default 512,2048)")
    p.add_argument("--batches", default="1,8,32,128", help="decode batch sizes (default 1,8,32,128)")
    p.add_argument("--prompt-len", type=int, default=512, help="prompt before the timed decode steps (default 512)")
    p.add_argument("--gen", type=int, default=32, help="timed decode steps (default 32)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    p.add_argument("--repeats", type=int, default=5, help="timed prefill calls per length (default 5)")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--budget-s", type=float, default=240.0,
                   help="no new measurement starts after this many seconds (default 240)")
    p.add_argument("--dry-run", action="store_true",
                   help="on the CPU in float32 with small sizes (prefill 16, batches 1,2, prompt 8, gen 3): "
                        "checks the script and the model code, times nothing meaningful")
    args = p.parse_args(argv)
    if args.dry_run:
        args.prefill, args.batches, args.prompt_len, args.gen, args.warmup, args.repeats = "16", "1,2", 8, 3, 1, 2
    args.prefill_lengths = parse_list(args.prefill, "--prefill")
    args.batch_sizes = parse_list(args.batches, "--batches")
    for name in ("prompt_len", "gen", "repeats"):
        if getattr(args, name) < 1:
            raise AnchorError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        raise AnchorError("--warmup must not be negative")
    return args


def main(argv=None):
    started = time.monotonic()
    try:
        args = parse_args(argv)
        if args.dry_run:
            device, dtype = torch.device("cpu"), torch.float32
        else:
            if not torch.cuda.is_available():
                raise AnchorError("no CUDA device visible to PyTorch (use --dry-run for the CPU check)")
            device, dtype = torch.device("cuda"), torch.bfloat16
        w, dims = load_weights(args.model, device, dtype)
    except AnchorError as e:
        print(f"cuda_torch_anchor: error: {e}", file=sys.stderr)
        return 1
    doc = {"kind": "torch_anchor", "model": str(Path(args.model).resolve().name), "dtype": str(dtype).replace("torch.", ""),
           "dims": dims, "machine": machine_facts(device), "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
           "method": "plain-torch Qwen3 over a static K/V cache; CUDA events; median after warm-up; random prompt ids",
           "eager": {"prefill": [], "decode": []}, "compiled": {"prefill": [], "decode": []}, "skipped": [], "errors": []}
    if args.dry_run:
        check = check_against_reference(args.model, w, dims)
        doc["reference_check"] = check
        print(f"reference check: {check}", flush=True)
        if not (check["prefill_nmse"] < 1e-8 and check["decode_nmse"] < 1e-8 and check["argmax_equal"]):
            write_json(args.out, doc)
            print("cuda_torch_anchor: error: the model code disagrees with tools/torch_reference.py", file=sys.stderr)
            return 1
    clock = Clock(device)
    can_compile = hasattr(torch, "compile") and not args.no_compile
    if not can_compile:
        doc["skipped"].append("torch.compile: " + ("--no-compile" if args.no_compile else "not in this torch"))
    # Eager first; then compiled decode before compiled prefill, as each compile takes long and
    # decode is what the targets compare with.
    plan = [(False, "prefill", n) for n in args.prefill_lengths] + [(False, "decode", b) for b in args.batch_sizes]
    if can_compile:
        plan += [(True, "decode", b) for b in args.batch_sizes] + [(True, "prefill", n) for n in args.prefill_lengths]
    for compiled, kind, size in plan:
        mode = "compiled" if compiled else "eager"
        label = f"{mode} {kind} {size}"
        if time.monotonic() - started > args.budget_s:
            doc["skipped"].append(f"{label}: over the {args.budget_s:g} s budget")
            continue
        try:
            if kind == "prefill":
                r = measure_prefill(args, w, dims, size, compiled, clock, device, dtype)
                print(f"{label}: {r['tokens_per_second']:.1f} tokens/s", flush=True)
            else:
                r = measure_decode(args, w, dims, size, compiled, clock, device, dtype)
                print(f"{label}: {r['tokens_per_second']:.1f} tokens/s", flush=True)
            doc[mode][kind].append(r)
        except Exception as e:  # a failed compile or an out-of-memory is a result, not the end
            doc["errors"].append({"what": label, "error": f"{type(e).__name__}: {e}"[:2000],
                                  "trace": traceback.format_exc()[-4000:]})
            print(f"{label}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr, flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
        doc["seconds"] = time.monotonic() - started
        write_json(args.out, doc)
    doc["seconds"] = time.monotonic() - started
    write_json(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
