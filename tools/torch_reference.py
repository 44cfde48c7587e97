#!/usr/bin/python3
"""torch_reference.py: FP32 PyTorch reference forward pass of a Qwen3 checkpoint.

Kipp's correctness gates compare its CPU/CUDA forward pass with this script's
logits. It loads a Hugging-Face-layout Qwen3 folder (config.json plus
model.safetensors or sharded model-*.safetensors with model.safetensors.index.json),
upcasts the BF16 weights to FP32 and computes, in FP32:

  embedding; per layer: RMSNorm -> q/k/v projections -> per-head RMSNorm on q, k ->
  RoPE (rotate-half, theta from config) -> [K, V rounded to BF16 with
  --round-kv-bf16, as Kipp's KV cache stores them] -> causal grouped-query
  attention -> o_proj + residual -> RMSNorm -> SwiGLU down(silu(gate) * up) +
  residual; final RMSNorm; head = embedding^T when tied, lm_head otherwise.
With --round-inputs-bf16 every matrix product's input is rounded to BF16 first, as
Kipp's fast CPU kernel tables do for BF16 weights (so the products multiply BF16 by
BF16); without it the products take the FP32 activations, as Kipp's reference table does.

RoPE angles are computed in float64 (position * theta^(-2i/d)) and their cos/sin
rounded to float32; Hugging Face computes the angle in float32, which differs by
far less than the gates' tolerances at short positions and is less exact at long ones.

Output: float32 logits of the last position (or of every position with
--all-positions), the ids, and with --dump-intermediates: embedding,
layer0_attention (layer 0's o_proj output before the residual add),
layer0_output (residual stream after layer 0) and final_norm, all positions.
Saved as one .npz (--out) and/or one .npy per array plus meta.json (--out-dir).
Runs are deterministic: fixed thread count, deterministic algorithms, and the
head is computed row by row so --all-positions' last row is bitwise equal to a
last-position-only run.
"""

import argparse
import json
import math
import mmap
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch


class RefError(Exception):
    """An error reported as one line with a non-zero exit."""


# ---------------------------------------------------------------- safetensors reader

_NP_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


class SafetensorsFile:
    """Minimal read-only safetensors reader over mmap (BF16, F16, F32)."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self._f = open(self.path, "rb")
            size = os.fstat(self._f.fileno()).st_size
            if size < 8:
                raise RefError(f"{self.path}: too small for a safetensors file")
            (hlen,) = struct.unpack("<Q", self._f.read(8))
            if hlen > size - 8 or hlen > 100_000_000:
                raise RefError(f"{self.path}: header length {hlen} is out of range")
            header = json.loads(self._f.read(hlen).decode("utf-8"))
            self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise RefError(f"cannot read {self.path}: {e}")
        except ValueError as e:
            raise RefError(f"{self.path}: bad header JSON: {e}")
        self._base = 8 + hlen
        self.metadata = header.pop("__metadata__", None)
        self.tensors = {}
        for name, info in header.items():
            dtype = info.get("dtype")
            if dtype not in _NP_DTYPES:
                raise RefError(f"{self.path}: tensor {name} has unsupported dtype {dtype}")
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
            itemsize = np.dtype(_NP_DTYPES[dtype]).itemsize
            if end - begin != math.prod(shape) * itemsize or begin < 0 or self._base + end > size:
                raise RefError(f"{self.path}: tensor {name} has inconsistent offsets {begin}..{end} "
                               f"for shape {list(shape)} {dtype}")
            self.tensors[name] = (dtype, shape, begin, end)

    def f32(self, name):
        """The tensor as a new float32 numpy array (BF16 bits shifted left by 16)."""
        dtype, shape, begin, end = self.tensors[name]
        raw = np.frombuffer(self._mm, dtype=_NP_DTYPES[dtype], count=math.prod(shape),
                            offset=self._base + begin)
        if dtype == "BF16":
            out = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            out = raw.astype(np.float32)
        return out.reshape(shape)


class Checkpoint:
    """config.json + weights of a Hugging-Face-layout folder (single file or sharded)."""

    def __init__(self, model_dir):
        self.dir = Path(model_dir)
        cfg_path = self.dir / "config.json"
        try:
            self.config = json.loads(cfg_path.read_text(encoding="utf-8"))
        except OSError as e:
            raise RefError(f"cannot read {cfg_path}: {e}")
        except ValueError as e:
            raise RefError(f"{cfg_path}: bad JSON: {e}")
        index_path = self.dir / "model.safetensors.index.json"
        single = self.dir / "model.safetensors"
        self.where = {}
        self.files = {}
        if single.exists():
            f = SafetensorsFile(single)
            self.files[single.name] = f
            for name in f.tensors:
                self.where[name] = single.name
        elif index_path.exists():
            try:
                index = json.loads(index_path.read_text(encoding="utf-8"))
                weight_map = index["weight_map"]
            except (OSError, ValueError, KeyError) as e:
                raise RefError(f"cannot read {index_path}: {e}")
            for name, fname in weight_map.items():
                if fname not in self.files:
                    self.files[fname] = SafetensorsFile(self.dir / fname)
                if name not in self.files[fname].tensors:
                    raise RefError(f"{index_path}: {name} is not in {fname}")
                self.where[name] = fname
        else:
            raise RefError(f"{self.dir}: neither model.safetensors nor model.safetensors.index.json")

    def has(self, name):
        return name in self.where

    def tensor(self, name, shape=None):
        if name not in self.where:
            raise RefError(f"{self.dir}: tensor {name} is missing")
        arr = self.files[self.where[name]].f32(name)
        if shape is not None and tuple(arr.shape) != tuple(shape):
            raise RefError(f"{self.dir}: tensor {name} has shape {list(arr.shape)}, expected {list(shape)}")
        return torch.from_numpy(arr)


# ---------------------------------------------------------------- model

def model_dims(cfg):
    try:
        h = int(cfg["hidden_size"])
        nh = int(cfg["num_attention_heads"])
        d = {
            "hidden": h,
            "layers": int(cfg["num_hidden_layers"]),
            "heads": nh,
            "kv_heads": int(cfg.get("num_key_value_heads", nh)),
            "head_dim": int(cfg.get("head_dim") or h // nh),
            "ffn": int(cfg["intermediate_size"]),
            "vocab": int(cfg["vocab_size"]),
            "eps": float(cfg.get("rms_norm_eps", 1e-6)),
            "theta": float(cfg.get("rope_theta", 10000.0)),
            "tied": bool(cfg.get("tie_word_embeddings", False)),
        }
    except (KeyError, TypeError, ValueError) as e:
        raise RefError(f"config.json lacks or has a bad field: {e}")
    if d["heads"] % d["kv_heads"] != 0:
        raise RefError(f"num_attention_heads {d['heads']} is not a multiple of num_key_value_heads {d['kv_heads']}")
    if d["head_dim"] % 2 != 0:
        raise RefError(f"head_dim {d['head_dim']} is odd")
    if cfg.get("rope_scaling") not in (None, {}):
        raise RefError("rope_scaling is not supported by this reference")
    return d


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def rope_cos_sin(n, head_dim, theta):
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    return (torch.from_numpy(np.cos(ang).astype(np.float32)),
            torch.from_numpy(np.sin(ang).astype(np.float32)))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def round_bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


def forward(ckpt, ids, all_positions=False, round_kv_bf16=False, dump=False, round_inputs_bf16=False):
    """Returns (logits [vocab] or [n, vocab], intermediates dict).

    round_inputs_bf16: every matrix product's input is rounded to BF16 first, as Kipp's fast CPU
    kernel tables do for BF16 weights (the products themselves stay FP32)."""
    inp = round_bf16 if round_inputs_bf16 else (lambda t: t)
    d = model_dims(ckpt.config)
    n = len(ids)
    h, nh, nkv, hd = d["hidden"], d["heads"], d["kv_heads"], d["head_dim"]
    group = nh // nkv
    if n == 0:
        raise RefError("no token ids")
    if min(ids) < 0 or max(ids) >= d["vocab"]:
        raise RefError(f"token id out of range [0, {d['vocab']})")
    inter = {}

    embed = ckpt.tensor("model.embed_tokens.weight", (d["vocab"], h))
    x = embed[torch.tensor(ids, dtype=torch.long)].clone()
    if not d["tied"]:
        del embed
    if dump:
        inter["embedding"] = x.clone()

    cos, sin = rope_cos_sin(n, hd, d["theta"])
    cos, sin = cos[:, None, :], sin[:, None, :]
    mask = torch.full((n, n), float("-inf")).triu(1)
    scale = 1.0 / math.sqrt(hd)

    for i in range(d["layers"]):
        p = f"model.layers.{i}."
        w = lambda name, shape: ckpt.tensor(p + name, shape)
        hn = rms_norm(x, w("input_layernorm.weight", (h,)), d["eps"])
        hn = inp(hn)
        q = (hn @ w("self_attn.q_proj.weight", (nh * hd, h)).T).view(n, nh, hd)
        k = (hn @ w("self_attn.k_proj.weight", (nkv * hd, h)).T).view(n, nkv, hd)
        v = (hn @ w("self_attn.v_proj.weight", (nkv * hd, h)).T).view(n, nkv, hd)
        q = rms_norm(q, w("self_attn.q_norm.weight", (hd,)), d["eps"])
        k = rms_norm(k, w("self_attn.k_norm.weight", (hd,)), d["eps"])
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if round_kv_bf16:
            k = round_bf16(k)
            v = round_bf16(v)
        attn = torch.empty(n, nh, hd)
        for g in range(nkv):
            qg = q[:, g * group:(g + 1) * group, :].transpose(0, 1)        # [group, n, hd]
            kg = k[:, g, :]                                                # [n, hd]
            vg = v[:, g, :]
            scores = (qg @ kg.T) * scale + mask                           # [group, n, n]
            probs = torch.softmax(scores, dim=-1)
            attn[:, g * group:(g + 1) * group, :] = (probs @ vg).transpose(0, 1)
        a = inp(attn.reshape(n, nh * hd)) @ w("self_attn.o_proj.weight", (h, nh * hd)).T
        x = x + a
        if dump and i == 0:
            inter["layer0_attention"] = a.clone()
        hn = rms_norm(x, w("post_attention_layernorm.weight", (h,)), d["eps"])
        hn = inp(hn)
        gate = hn @ w("mlp.gate_proj.weight", (d["ffn"], h)).T
        up = hn @ w("mlp.up_proj.weight", (d["ffn"], h)).T
        x = x + inp(torch.nn.functional.silu(gate) * up) @ w("mlp.down_proj.weight", (h, d["ffn"])).T
        if dump and i == 0:
            inter["layer0_output"] = x.clone()

    xn = rms_norm(x, ckpt.tensor("model.norm.weight", (h,)), d["eps"])
    if dump:
        inter["final_norm"] = xn.clone()
    head = embed if d["tied"] else ckpt.tensor("lm_head.weight", (d["vocab"], h))
    rows = range(n) if all_positions else [n - 1]
    # Row by row (matrix-vector), so each row's logits do not depend on which rows are computed.
    logits = torch.stack([head @ inp(xn[r]) for r in rows])
    if not all_positions:
        logits = logits[0]
    return logits, inter


# ---------------------------------------------------------------- command line

def parse_ids(args):
    text = args.ids
    if args.ids_file:
        try:
            text = Path(args.ids_file).read_text(encoding="utf-8")
        except OSError as e:
            raise RefError(f"cannot read {args.ids_file}: {e}")
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise RefError("token ids must be integers separated by commas or whitespace")
    if not ids:
        raise RefError("no token ids given")
    return ids


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="torch_reference.py",
        description="FP32 PyTorch reference forward pass of a Hugging-Face-layout Qwen3 checkpoint "
                    "(BF16 weights upcast to FP32). Prints the argmax and top-5 logits of the last "
                    "position and saves the logits.",
        epilog="Examples:\n"
               "  tools/torch_reference.py --model build/models/qwen3-tiny-synth --ids 9707,11,1879,0 "
               "--out /tmp/ref.npz\n"
               "  tools/torch_reference.py --model M --ids-file ids.txt --round-kv-bf16 --all-positions "
               "--dump-intermediates --out-dir /tmp/ref\n"
               "npz keys / npy files: logits (float32 [vocab] or [n, vocab]), ids (int64 [n]) and with "
               "--dump-intermediates embedding, layer0_attention, layer0_output, final_norm "
               "(float32 [n, hidden]).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, metavar="HF_DIR",
                   help="folder with config.json and model.safetensors (or sharded files + index)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ids", help="token ids, comma-separated, e.g. 9707,11,1879")
    src.add_argument("--ids-file", metavar="F", help="file with token ids separated by commas or whitespace")
    p.add_argument("--all-positions", action="store_true", help="logits for every position ([n, vocab])")
    p.add_argument("--round-kv-bf16", action="store_true",
                   help="round K (after RoPE) and V to BF16 (nearest even), as Kipp's KV cache stores them")
    p.add_argument("--round-inputs-bf16", action="store_true",
                   help="round each matrix product's input to BF16, as Kipp's fast CPU kernels do for BF16 "
                        "weights (without it: FP32 activations, as Kipp's reference kernels)")
    p.add_argument("--dump-intermediates", action="store_true",
                   help="also save embedding, layer0_attention, layer0_output and final_norm (all positions)")
    p.add_argument("--out", metavar="OUT.npz", help="write arrays to this .npz file")
    p.add_argument("--out-dir", metavar="D", help="write one .npy file per array plus meta.json into D")
    p.add_argument("--threads", type=int, default=1,
                   help="torch/BLAS threads (default 1; results are bitwise reproducible for a fixed count)")
    p.add_argument("--top", type=int, default=5, help="how many top logits to print (default 5)")
    return p.parse_args(argv)


def save_outputs(args, arrays, meta):
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, out)
    if args.out_dir:
        d = Path(args.out_dir)
        d.mkdir(parents=True, exist_ok=True)
        for key, arr in arrays.items():
            tmp = d / f".{key}.tmp-{os.getpid()}.npy"
            np.save(tmp, arr)
            os.replace(tmp, d / f"{key}.npy")
        tmp = d / f".meta.json.tmp-{os.getpid()}"
        tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, d / "meta.json")


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.threads < 1:
            raise RefError("--threads must be at least 1")
        torch.set_num_threads(args.threads)
        torch.use_deterministic_algorithms(True)
        ids = parse_ids(args)
        t0 = time.time()
        with torch.no_grad():
            ckpt = Checkpoint(args.model)
            logits, inter = forward(ckpt, ids, all_positions=args.all_positions,
                                    round_kv_bf16=args.round_kv_bf16, dump=args.dump_intermediates,
                                    round_inputs_bf16=args.round_inputs_bf16)
        seconds = time.time() - t0
        arrays = {"logits": logits.numpy().astype(np.float32, copy=False),
                  "ids": np.asarray(ids, dtype=np.int64)}
        for key, t in inter.items():
            arrays[key] = t.numpy().astype(np.float32, copy=False)
        meta = {
            "model": str(Path(args.model).resolve()),
            "ids": ids,
            "all_positions": args.all_positions,
            "round_kv_bf16": args.round_kv_bf16,
            "round_inputs_bf16": args.round_inputs_bf16,
            "threads": args.threads,
            "torch_version": torch.__version__,
            "arrays": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in arrays.items()},
        }
        save_outputs(args, arrays, meta)
    except RefError as e:
        print(f"torch_reference: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"torch_reference: error: {e}", file=sys.stderr)
        return 1

    last = arrays["logits"] if arrays["logits"].ndim == 1 else arrays["logits"][-1]
    order = np.argsort(-last, kind="stable")[:max(1, args.top)]
    print(f"torch_reference: {len(ids)} tokens, {seconds:.2f} s, logits {list(arrays['logits'].shape)}, "
          f"last-position std {last.std():.4f}")
    print(f"argmax {int(order[0])} ({last[order[0]]:.6f})")
    print("top-%d: %s" % (len(order), ", ".join(f"{int(t)}:{last[t]:.6f}" for t in order)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
