#!/usr/bin/python3
"""train_reference.py: the PyTorch autograd reference for Kipp's training model.

A plain float32 PyTorch Qwen3 decoder (the same module names as Hugging Face's, so
its state dict has the HF tensor names) built from an FP32 safetensors file of
weights. Three modes:

  grad   one micro-batch: the summed cross-entropy over targets != -1 and every
         parameter's gradient of it.
  train  N AdamW steps of grad-accumulated micro-batches: torch.optim.AdamW
         (betas, eps, weight decay on projections and embeddings but not on norm
         gains), clip_grad_norm_, and the learning rate of src/train/lr_schedule.cpp
         set before each step (what LambdaLR would do); each micro-batch's summed
         loss is divided by the step's total count of counted targets.
  bench  tokens/s of forward + backward (no optimizer) on random weights, and the
         peak RSS, for comparing with Kipp's training model; with --full-step,
         of whole training steps (clip_grad_norm_ and AdamW too), as
         bench/train_bench measures Kipp's (bench/train_vs_torch.py runs both);
         --autocast-bf16 runs forward and loss under torch.autocast (BF16 on the CPU),
         --lora-rank R freezes the model and trains lora_reference.py's rank-R
         adapters (alpha 2R) on all seven projections, as bench/lora_bench does.

Inputs: --config, an HF-style config.json (hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
vocab_size, rope_theta, rms_norm_eps, tie_word_embeddings); --weights, FP32
(or BF16, upcast exactly) safetensors with the HF names; --batch, safetensors with int32 "inputs" and
"targets", [batch, seq] for grad and [steps, micro_batches, batch, seq] for train.
Outputs (--out): FP32 safetensors, the gradients (grad) or the final weights
(train), with the losses in the metadata ("loss_sum", "counted"; train: "losses"
and "grad_norms", JSON lists of each step's summed loss and gradient norm before
clipping). Safetensors are read and written here
with json + numpy, no other package.

RoPE: cos/sin of position * theta^(-2i/head_dim) computed in float64 and rounded
to float32, as Kipp does.
"""

import argparse
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class RefError(Exception):
    """An error reported as one line with a non-zero exit."""


# ---------------------------------------------------------------- safetensors

_DTYPES = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "BF16": np.uint16}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise RefError(f"{path}: too short for safetensors")
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + header_len])
    data = memoryview(blob)[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise RefError(f"{path}: tensor {name} has dtype {info['dtype']} (expected F32, BF16, I32 or I64)")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=_DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":  # exact: a BF16 value is the top half of its float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    offset = 0
    blobs = []
    for name, array in tensors.items():
        array = np.ascontiguousarray(array, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        blobs.append(array.tobytes())
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------- model


class Config:
    def __init__(self, d):
        try:
            self.hidden = int(d["hidden_size"])
            self.layers = int(d["num_hidden_layers"])
            self.heads = int(d["num_attention_heads"])
            self.kv_heads = int(d["num_key_value_heads"])
            self.head_dim = int(d.get("head_dim") or self.hidden // self.heads)
            self.ffn = int(d["intermediate_size"])
            self.vocab = int(d["vocab_size"])
            self.theta = float(d["rope_theta"])
            self.eps = float(d["rms_norm_eps"])
            self.tied = bool(d["tie_word_embeddings"])
        except KeyError as e:
            raise RefError(f"config: missing field {e}") from None


class RMSNorm(nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_tables(cfg, seq_len):
    i = np.arange(cfg.head_dim // 2, dtype=np.float64)
    inv_freq = cfg.theta ** (-2.0 * i / cfg.head_dim)
    angles = np.arange(seq_len, dtype=np.float64)[:, None] * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=1)
    return (torch.from_numpy(np.cos(angles).astype(np.float32)), torch.from_numpy(np.sin(angles).astype(np.float32)))


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.eps)

    def forward(self, x, cos, sin):
        cfg = self.cfg
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, cfg.heads, cfg.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, cfg.kv_heads, cfg.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Query head j reads key/value head j // (heads / kv_heads).
        group = cfg.heads // cfg.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) * cfg.head_dim**-0.5
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, cfg.heads * cfg.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.down_proj = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.eps)


class Qwen3ForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Qwen3Model(cfg)
        self.lm_head = None if cfg.tied else nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def logits(self, inputs):
        """[batch, seq, vocab] float32 logits of every position."""
        cos, sin = rope_tables(self.cfg, inputs.shape[1])
        x = self.model.embed_tokens(inputs)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return x @ head.t()

    def forward(self, inputs, targets):
        """Summed cross-entropy (natural log) over targets != -1."""
        logits = self.logits(inputs)
        return F.cross_entropy(logits.view(-1, self.cfg.vocab), targets.reshape(-1), ignore_index=-1, reduction="sum")


def build_model(cfg, weights_path):
    model = Qwen3ForCausalLM(cfg)
    if weights_path is None:
        return model
    weights = read_safetensors(weights_path)
    state = model.state_dict()
    if set(weights) != set(state):
        raise RefError(f"{weights_path}: tensors {sorted(set(weights) ^ set(state))} differ from the model's")
    for name, value in weights.items():
        if tuple(value.shape) != tuple(state[name].shape):
            raise RefError(f"{weights_path}: {name} has shape {list(value.shape)}, expected {list(state[name].shape)}")
    model.load_state_dict({name: torch.from_numpy(value) for name, value in weights.items()})
    return model


def learning_rate(step, max_lr, min_lr, warmup, total):
    """Cosine with linear warmup, as learning_rate() in src/train/lr_schedule.cpp."""
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    decay = total - warmup
    progress = 1.0 if decay == 0 else (step - warmup) / decay
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def load_batch(path, dims):
    batch = read_safetensors(path)
    inputs, targets = batch.get("inputs"), batch.get("targets")
    if inputs is None or targets is None:
        raise RefError(f"{path}: needs int32 tensors 'inputs' and 'targets'")
    if inputs.ndim != dims or inputs.shape != targets.shape:
        raise RefError(f"{path}: inputs {list(inputs.shape)} / targets {list(targets.shape)}, expected {dims} dims")
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))


def run_grad(args, cfg):
    model = build_model(cfg, args.weights)
    inputs, targets = load_batch(args.batch, 2)
    loss = model(inputs, targets)
    loss.backward()
    grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
    counted = int((targets != -1).sum())
    write_safetensors(args.out, grads, {"loss_sum": repr(float(loss)), "counted": counted})
    print(f"grad: loss_sum {float(loss):.9g} over {counted} targets")


def run_train(args, cfg):
    model = build_model(cfg, args.weights)
    inputs, targets = load_batch(args.batch, 4)
    decay = [p for n, p in model.named_parameters() if not n.endswith("norm.weight")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("norm.weight")]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    total_steps = args.total_steps or inputs.shape[0]
    losses, norms = [], []
    for step in range(inputs.shape[0]):
        optimizer.zero_grad()
        counted = int((targets[step] != -1).sum())
        step_loss = 0.0
        for micro in range(inputs.shape[1]):
            loss = model(inputs[step, micro], targets[step, micro])
            (loss / counted).backward()
            step_loss += float(loss)
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.lr, args.min_lr, args.warmup, total_steps)
        optimizer.step()
        losses.append(step_loss)
    weights = {name: p.detach().numpy() for name, p in model.named_parameters()}
    write_safetensors(args.out, weights, {"losses": json.dumps(losses), "grad_norms": json.dumps(norms)})
    print(f"train: {len(losses)} steps, loss {losses[0]:.6g} -> {losses[-1]:.6g}")


def attach_lora(model, rank, base_dtype):
    """Freezes the model (its matrices stored as base_dtype) and wraps all seven projections of
    every layer in lora_reference.py's LoraLinear (alpha = 2 rank, B zero); returns the adapters."""
    import lora_reference  # imports this module: loaded here, not at the top

    for p in model.parameters():
        p.requires_grad_(False)
        if p.dim() > 1:
            p.data = p.data.to(base_dtype)
    generator = np.random.default_rng(2)
    adapters = []
    for layer in model.model.layers:
        for owner, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                             (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
            for name in names:
                base = getattr(owner, name)
                a = (generator.standard_normal((rank, base.in_features)) / math.sqrt(base.in_features))
                b = np.zeros((base.out_features, rank))
                lora = lora_reference.LoraLinear(base, a.astype(np.float32), b.astype(np.float32), 2.0)
                setattr(owner, name, lora)
                adapters += [lora.lora_A, lora.lora_B]
    return adapters


def run_bench(args, cfg):
    rss_at_setup_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    torch.manual_seed(0)
    model = build_model(cfg, None)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02)
    if args.lora_rank:
        base_dtype = torch.bfloat16 if args.autocast_bf16 else torch.float32
        trainable = attach_lora(model, args.lora_rank, base_dtype)
        groups = [{"params": trainable, "weight_decay": args.weight_decay}]
    else:
        trainable = list(model.parameters())
        # As run_train and Kipp's trainer: decay on everything but the norm gains.
        groups = [{"params": [p for n, p in model.named_parameters() if not n.endswith("norm.weight")],
                   "weight_decay": args.weight_decay},
                  {"params": [p for n, p in model.named_parameters() if n.endswith("norm.weight")],
                   "weight_decay": 0.0}]
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randint(0, cfg.vocab, (args.batch_size, args.seq_len), generator=generator)
    targets = torch.randint(0, cfg.vocab, (args.batch_size, args.seq_len), generator=generator)
    tokens = args.batch_size * args.seq_len
    optimizer = None
    if args.full_step:
        optimizer = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast_bf16)

    def step_loss():  # a temporary, so no step's graph outlives its backward
        with autocast:
            return model(inputs, targets) / (1 if optimizer is None else tokens)

    times = []
    for _ in range(args.iterations + 1):
        if optimizer is None:
            model.zero_grad(set_to_none=False)
            start = time.perf_counter()
            step_loss().backward()
        else:
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=False)
            step_loss().backward()
            torch.nn.utils.clip_grad_norm_(trainable, args.clip)
            optimizer.step()
        times.append(time.perf_counter() - start)
    timed = times[1:]  # the first (warm-up) run left out
    seconds = sorted(timed)[len(timed) // 2]  # median (the upper one of an even count)
    rates = [tokens / t for t in timed]
    result = {"tokens_per_s": tokens / seconds, "step_s": seconds, "threads": torch.get_num_threads(),
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if args.full_step:
        result.update({
            "implementation": "pytorch", "step": "zero_grad + forward/backward + clip_grad_norm_ + AdamW",
            "tokens_per_step": tokens, "timed_steps": len(timed), "tokens_per_s_min": min(rates),
            "tokens_per_s_max": max(rates), "parameters": sum(p.numel() for p in model.parameters()),
            "trained_parameters": sum(p.numel() for p in trainable),
            "precision": "bf16 autocast" if args.autocast_bf16 else "fp32", "lora_rank": args.lora_rank,
            "peak_rss_mb_before_model": rss_at_setup_start, "torch": torch.__version__,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled()})
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["grad", "train", "bench"])
    parser.add_argument("--config", required=True, help="HF-style config.json")
    parser.add_argument("--weights", help="FP32 safetensors with HF tensor names (grad, train)")
    parser.add_argument("--batch", help="safetensors with int32 inputs and targets (grad, train)")
    parser.add_argument("--out", help="output safetensors (grad, train)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (train)")
    parser.add_argument("--min-lr", type=float, default=1e-4)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--total-steps", type=int, default=0, help="schedule length (default: the steps given)")
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=4, help="bench")
    parser.add_argument("--seq-len", type=int, default=256, help="bench")
    parser.add_argument("--iterations", type=int, default=3, help="bench: timed runs after one warm-up")
    parser.add_argument("--full-step", action="store_true",
                        help="bench: time whole training steps (zero_grad, forward/backward of the loss over the "
                             "step's tokens, clip_grad_norm_ to --clip, AdamW with --weight-decay), as "
                             "bench/train_bench does, and report more detail")
    parser.add_argument("--autocast-bf16", action="store_true",
                        help="bench: forward and loss under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    parser.add_argument("--lora-rank", type=int, default=0,
                        help="bench: train only rank-R LoRA adapters (alpha 2R) on all seven projections of a "
                             "frozen base, stored in BF16 with --autocast-bf16 and in FP32 otherwise")
    args = parser.parse_args()
    # OpenBLAS sizes its thread pool when torch loads it, from OMP_NUM_THREADS (importing torch
    # alone leaves it at one thread here): run again with the variable set.
    if os.environ.get("OMP_NUM_THREADS") != str(args.threads):
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        os.execv(sys.executable, [sys.executable] + sys.argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    try:
        with open(args.config) as f:
            cfg = Config(json.load(f))
        if args.mode != "bench" and not (args.weights and args.batch and args.out):
            raise RefError(f"{args.mode} needs --weights, --batch and --out")
        {"grad": run_grad, "train": run_train, "bench": run_bench}[args.mode](args, cfg)
    except (RefError, OSError, ValueError) as e:
        print(f"train_reference.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
