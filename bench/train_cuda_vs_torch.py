#!/usr/bin/python3
"""Training throughput, MFU and peak GPU memory of Kipp on an NVIDIA GPU against PyTorch on the same card.

The model is configs/<name>.yaml's Qwen3 (RMSNorm, per-head Q/K RMSNorm, rotate-half RoPE,
grouped-query causal attention, SwiGLU, tied head), defined in plain PyTorch with the fused
attention of torch.nn.functional.scaled_dot_product_attention. Each step: zero the gradients,
forward and backward of the mean cross-entropy over random tokens, clip the gradient norm to
1.0, AdamW (fused=True), FP32 master weights under BF16 autocast. Variants: PyTorch eager,
PyTorch torch.compile (when it compiles on this machine; the reason is recorded when not).
Kipp's side is not timed yet: the script records why `kipp train --device cuda` cannot run
(its own error line), so the JSON says what was compared. Cases: tiny (micro-batch 8 x 256) and small (16 x 512), a 32000-token
vocabulary. tokens/s is the median over the timed steps after the warm-up; MFU counts
6 x parameters + the attention's 12 x layers x seq x q_width FLOPs per token against
--peak-tflops (the card's dense BF16 peak; default: the H100 SXM's 989).

Usage: bench/train_cuda_vs_torch.py [--kipp build/release/kipp] [--cases tiny,small]
           [--steps 20] [--warmup 5] [--peak-tflops 989] [--out bench/results/train-cuda.json]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

CASES = {"tiny": (8, 256), "small": (16, 512)}
VOCAB = 32000
TARGETS = {"small_over_torch_eager_at_least": 1.3, "small_over_torch_compile_at_least": 1.0}


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


def build_torch_model(torch, dims, vocab, seq):
    nn, F = torch.nn, torch.nn.functional

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
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
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

    return Model()


def flops_per_token(dims, vocab, seq):
    h, hd, layers = dims["hidden"], dims["head_dim"], dims["layers"]
    q_width, kv_width = dims["heads"] * hd, dims["kv_heads"] * hd
    params = vocab * h + layers * (h * (q_width + 2 * kv_width) + q_width * h + 3 * h * dims["ffn"])
    # 6 per parameter (forward 2, backward 4); causal attention's QK^T and PV over half the keys on average.
    return 6 * params + 12 * layers * seq * q_width / 2


def torch_run(torch, dims, batch, seq, steps, warmup, compiled):
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = build_torch_model(torch, dims, VOCAB, seq).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    forward = torch.compile(model) if compiled else model
    inputs = torch.randint(0, VOCAB, (batch, seq), device=device)
    targets = torch.randint(0, VOCAB, (batch, seq), device=device)
    torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(warmup + steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    return {"step_s_median": step_s, "step_s_min": min(times), "step_s_max": max(times),
            "tokens_per_s": batch * seq / step_s, "peak_vram_bytes": torch.cuda.max_memory_allocated(),
            "final_loss": float(loss.item())}


def kipp_cuda_available(kipp):
    """None when `kipp train --device cuda` can run here, else the reason it cannot."""
    if not os.path.exists(kipp):
        return f"{kipp} not found"
    help_text = subprocess.run([kipp, "train", "--help"], capture_output=True, text=True, check=False).stdout
    if "--device" not in help_text:
        return "this kipp has no --device option"
    # The device is checked right after the config loads, before the (missing) inputs are read.
    probe = subprocess.run([kipp, "train", "--config", "configs/tiny.yaml", "--device", "cuda", "--set",
                            "tokenizer=/nonexistent/tokenizer.json", "--set", "data.train=[/nonexistent.txt]",
                            "--set", "run.dir=/tmp/kipp-cuda-probe"], capture_output=True, text=True, check=False)
    for line in probe.stderr.splitlines():
        if "train.device: cuda" in line:
            return line.strip()
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kipp", default="build/release/kipp")
    parser.add_argument("--cases", default="tiny,small")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the card's dense BF16 peak")
    parser.add_argument("--out", default="bench/results/train-cuda.json")
    args = parser.parse_args()

    import torch  # the GPU machine's; imported here so --help works anywhere
    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device", file=sys.stderr)
        return 77
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "peak_tflops": args.peak_tflops,
              "vocab": VOCAB, "steps": args.steps, "warmup": args.warmup, "cases": {}}
    kipp_reason = kipp_cuda_available(args.kipp)
    result["kipp"] = f"not measured: {kipp_reason}" if kipp_reason else \
        "not measured: kipp train --device cuda runs here, but this script does not time it yet"
    for name in args.cases.split(","):
        batch, seq = CASES[name]
        dims = model_section(f"configs/{name}.yaml")
        flops = flops_per_token(dims, VOCAB, seq)
        case = {"batch": batch, "seq_len": seq, "model": dims, "flops_per_token": flops, "runs": {}}
        for label, compiled in (("torch_eager", False), ("torch_compile", True)):
            try:
                run = torch_run(torch, dims, batch, seq, args.steps, args.warmup, compiled)
                run["mfu"] = run["tokens_per_s"] * flops / (args.peak_tflops * 1e12)
                case["runs"][label] = run
            except Exception as e:  # torch.compile may be unavailable on the machine (no Triton, no compiler)
                case["runs"][label] = {"error": f"{type(e).__name__}: {e}"}
            torch.cuda.empty_cache()
            print(f"{name} {label}: {json.dumps(case['runs'][label])}", file=sys.stderr)
        result["cases"][name] = case
    result["targets"] = TARGETS
    result["targets_met"] = "not evaluated: Kipp not measured"
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({k: v for k, v in result.items() if k != "cases"}, indent=2))
    print(json.dumps({n: {l: r.get("tokens_per_s", r.get("error")) for l, r in c["runs"].items()}
                      for n, c in result["cases"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
