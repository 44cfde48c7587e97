#!/usr/bin/python3
"""Tests for tools/torch_reference.py (the FP32 PyTorch Qwen3 reference). unittest only.

Run: /usr/bin/python3 tools/tests/test_torch_reference.py [-v]
Environment:
  KIPP_TINY_MODEL_DIR  a tiny synthetic checkpoint (tools/make_synthetic.py --preset tiny);
                       when unset, one is generated into a temporary folder.

The key check is an independent cross-check: a naive float64 numpy forward pass
written here (its own safetensors reader, explicit loops over heads and
positions, its own RoPE and BF16 rounding) must match the torch logits within
NMSE 1e-10. Extra small models exercise grouped-query attention (q heads = 4 x
kv heads) and an untied lm_head, which the tiny preset does not have.
"""

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
REF = str(TOOLS / "torch_reference.py")
MAKE = str(TOOLS / "make_synthetic.py")

IDS = [9707, 11, 1879, 0, 151645, 3555]   # 6 ids, one special token


# ---------------------------------------------------------------- naive float64 implementation

def naive_read(model_dir):
    """{name: float64 array} from model.safetensors or the index's shards."""
    model_dir = Path(model_dir)
    files = [model_dir / "model.safetensors"]
    if not files[0].exists():
        index = json.loads((model_dir / "model.safetensors.index.json").read_text())
        files = [model_dir / f for f in sorted(set(index["weight_map"].values()))]
    out = {}
    for path in files:
        blob = path.read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        header.pop("__metadata__", None)
        for name, info in header.items():
            assert info["dtype"] == "BF16", (name, info["dtype"])
            b, e = info["data_offsets"]
            bits = np.frombuffer(blob, dtype="<u2", count=(e - b) // 2, offset=8 + n + b)
            out[name] = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(info["shape"])
    return out


def naive_bf16(x):
    """Round float64 values (via float32) to BF16, nearest even, written independently."""
    f = np.asarray(x, dtype=np.float32)
    out = np.empty_like(f)
    for idx, v in np.ndenumerate(f):
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        upper, lower = bits >> 16, bits & 0xFFFF
        if lower > 0x8000 or (lower == 0x8000 and (upper & 1)):
            upper += 1
        out[idx] = struct.unpack("<f", struct.pack("<I", (upper & 0xFFFF) << 16))[0]
    return out.astype(np.float64)


def naive_rmsnorm(v, w, eps):
    return v / math.sqrt(float(np.mean(v * v)) + eps) * w


def naive_rope(v, pos, theta):
    """Rotate-half RoPE on one head vector at one position."""
    d = v.shape[0]
    half = d // 2
    out = np.empty(d)
    for i in range(half):
        ang = pos * theta ** (-2.0 * i / d)
        c, s = math.cos(ang), math.sin(ang)
        out[i] = v[i] * c - v[i + half] * s
        out[i + half] = v[i + half] * c + v[i] * s
    return out


def naive_forward(model_dir, ids, round_kv=False):
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    W = naive_read(model_dir)
    L = cfg["num_hidden_layers"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    n = len(ids)
    x = np.stack([W["model.embed_tokens.weight"][t] for t in ids])
    inter = {"embedding": x.copy()}
    for l in range(L):
        p = f"model.layers.{l}."
        hn = np.stack([naive_rmsnorm(x[t], W[p + "input_layernorm.weight"], eps) for t in range(n)])
        q = hn @ W[p + "self_attn.q_proj.weight"].T
        k = hn @ W[p + "self_attn.k_proj.weight"].T
        v = hn @ W[p + "self_attn.v_proj.weight"].T
        qh = np.zeros((n, nh, hd))
        kh = np.zeros((n, nkv, hd))
        vh = np.zeros((n, nkv, hd))
        for t in range(n):
            for h in range(nh):
                qv = naive_rmsnorm(q[t, h * hd:(h + 1) * hd], W[p + "self_attn.q_norm.weight"], eps)
                qh[t, h] = naive_rope(qv, t, theta)
            for g in range(nkv):
                kv = naive_rmsnorm(k[t, g * hd:(g + 1) * hd], W[p + "self_attn.k_norm.weight"], eps)
                kh[t, g] = naive_rope(kv, t, theta)
                vh[t, g] = v[t, g * hd:(g + 1) * hd]
        if round_kv:
            kh = naive_bf16(kh)
            vh = naive_bf16(vh)
        att = np.zeros((n, nh * hd))
        for h in range(nh):
            g = h // (nh // nkv)
            for t in range(n):
                scores = np.array([qh[t, h] @ kh[s, g] for s in range(t + 1)]) / math.sqrt(hd)
                e = np.exp(scores - scores.max())
                pr = e / e.sum()
                att[t, h * hd:(h + 1) * hd] = sum(pr[s] * vh[s, g] for s in range(t + 1))
        a = att @ W[p + "self_attn.o_proj.weight"].T
        x = x + a
        if l == 0:
            inter["layer0_attention"] = a
        hn = np.stack([naive_rmsnorm(x[t], W[p + "post_attention_layernorm.weight"], eps) for t in range(n)])
        gate = hn @ W[p + "mlp.gate_proj.weight"].T
        up = hn @ W[p + "mlp.up_proj.weight"].T
        x = x + ((gate / (1.0 + np.exp(-gate))) * up) @ W[p + "mlp.down_proj.weight"].T
        if l == 0:
            inter["layer0_output"] = x.copy()
    xn = np.stack([naive_rmsnorm(x[t], W["model.norm.weight"], eps) for t in range(n)])
    inter["final_norm"] = xn
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return head @ xn[-1], inter


def nmse(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


# ---------------------------------------------------------------- helpers

class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_ref(model, ids, *flags, out=None, subprocess_run=False):
    """Run torch_reference's command line, in a new process or (faster) in this one."""
    argv = ["--model", str(model), "--ids", ",".join(map(str, ids)), *flags]
    if out is not None:
        argv += ["--out", str(out)]
    if subprocess_run:
        r = subprocess.run([PY, REF, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    else:
        import contextlib
        import io
        import torch_reference
        o, e = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            rc = torch_reference.main(argv)
        r = _Result(rc, o.getvalue(), e.getvalue())
    if out is None:
        return r
    if r.returncode != 0:
        raise AssertionError(f"torch_reference failed ({r.returncode}): {r.stderr}")
    with np.load(out) as z:
        return {k: z[k] for k in z.files}, r.stdout


def write_model(out_dir, dims, seed, shards=1):
    """A small checkpoint with custom dimensions, using make_synthetic's writer."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = ms.build_config(dims)
    (out_dir / "config.json").write_bytes(ms.config_text(cfg, False))
    specs = ms.tensor_specs(cfg)
    prog = ms.Progress(1, False)
    if shards == 1:
        ms.write_safetensors(out_dir / "model.safetensors", specs, seed, prog)
    else:
        wm = {}
        for i, group in enumerate(ms.split_shards(specs, shards)):
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            ms.write_safetensors(out_dir / fname, group, seed, prog)
            wm.update({name: fname for name, _s, _k in group})
        (out_dir / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    return cfg


GQA_DIMS = dict(ms.TINY, hidden_size=192, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                head_dim=32, intermediate_size=320, vocab_size=1024, rope_theta=10000)
UNTIED_DIMS = dict(GQA_DIMS, num_attention_heads=4, num_key_value_heads=4, head_dim=48,
                   tie_word_embeddings=False, vocab_size=2000)


class TorchReferenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="kipp-ref-test-")
        cls.t = Path(cls.tmp.name)
        env = os.environ.get("KIPP_TINY_MODEL_DIR")
        if env:
            cls.model = Path(env)
        else:
            cls.model = cls.t / "tiny"
            r = subprocess.run([PY, MAKE, "--preset", "tiny", "--out", str(cls.model), "--no-tokenizer", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise RuntimeError("make_synthetic failed: " + r.stderr)
        cls.cfg = json.loads((cls.model / "config.json").read_text())
        cls.base, cls.base_stdout = run_ref(cls.model, IDS, "--dump-intermediates", out=cls.t / "base.npz",
                                           subprocess_run=True)
        cls.naive_logits, cls.naive_inter = naive_forward(cls.model, IDS)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_deterministic_bitwise(self):
        # A second process, and a run in this process: all bitwise equal.
        again, _ = run_ref(self.model, IDS, "--dump-intermediates", out=self.t / "again.npz", subprocess_run=True)
        here, _ = run_ref(self.model, IDS, "--dump-intermediates", out=self.t / "here.npz")
        for key in self.base:
            self.assertEqual(self.base[key].tobytes(), here[key].tobytes(), key)
        for key in self.base:
            self.assertEqual(self.base[key].tobytes(), again[key].tobytes(), key)

    def test_shapes_and_ids(self):
        V, H, n = self.cfg["vocab_size"], self.cfg["hidden_size"], len(IDS)
        self.assertEqual(self.base["logits"].shape, (V,))
        self.assertEqual(self.base["logits"].dtype, np.float32)
        np.testing.assert_array_equal(self.base["ids"], IDS)
        for key in ("embedding", "layer0_attention", "layer0_output", "final_norm"):
            self.assertEqual(self.base[key].shape, (n, H), key)
            self.assertEqual(self.base[key].dtype, np.float32, key)

    def test_logits_not_flat(self):
        logits = self.base["logits"].astype(np.float64)
        self.assertTrue(np.isfinite(logits).all())
        std = logits.std()
        top = np.sort(logits)[::-1]
        self.assertGreater(std, 0.5, "logits are nearly flat")
        self.assertGreater(top[0] - top[1], 0.05 * std, "no clear top-1")
        self.assertEqual(int(np.argmax(logits)), int(np.argmax(self.naive_logits)))
        self.assertIn(f"argmax {int(np.argmax(logits))} ", self.base_stdout)
        self.assertIn("top-5:", self.base_stdout)

    def test_matches_naive_float64(self):
        self.assertLess(nmse(self.base["logits"], self.naive_logits), 1e-10)
        np.testing.assert_array_equal(self.base["embedding"], self.naive_inter["embedding"])
        for key in ("layer0_attention", "layer0_output", "final_norm"):
            self.assertLess(nmse(self.base[key], self.naive_inter[key]), 1e-10, key)

    def test_round_kv_bf16(self):
        rounded, _ = run_ref(self.model, IDS, "--round-kv-bf16", out=self.t / "kv.npz")
        naive_rounded, _ = naive_forward(self.model, IDS, round_kv=True)
        # Not 1e-10: an element whose fp32 (torch) and float64 (naive) values straddle a BF16
        # rounding boundary rounds one BF16 ulp apart (measured 5e-11 to 8e-9). Still far
        # below the effect of the rounding itself (about 1e-5), checked next.
        self.assertLess(nmse(rounded["logits"], naive_rounded), 3e-7)
        # The flag must change something, but only a little.
        d = nmse(rounded["logits"], self.base["logits"])
        self.assertGreater(d, 1e-14)
        self.assertLess(d, 1e-3)

    def test_all_positions_last_row_equals_last_only(self):
        allp, _ = run_ref(self.model, IDS, "--all-positions", out=self.t / "all.npz")
        self.assertEqual(allp["logits"].shape, (len(IDS), self.cfg["vocab_size"]))
        self.assertEqual(allp["logits"][-1].tobytes(), self.base["logits"].tobytes())
        # Row t equals a run on the first t+1 ids (causality).
        prefix, _ = run_ref(self.model, IDS[:3], out=self.t / "prefix.npz")
        self.assertLess(nmse(allp["logits"][2], prefix["logits"]), 1e-10)

    def test_out_dir(self):
        d = self.t / "outdir"
        r = run_ref(self.model, IDS, "--out-dir", str(d), "--dump-intermediates")
        self.assertEqual(r.returncode, 0, r.stderr)
        meta = json.loads((d / "meta.json").read_text())
        self.assertEqual(meta["ids"], IDS)
        for key in ("logits", "ids", "embedding", "layer0_attention", "layer0_output", "final_norm"):
            np.testing.assert_array_equal(np.load(d / f"{key}.npy"), self.base[key])

    def test_gqa_and_sharded(self):
        single = self.t / "gqa"
        sharded = self.t / "gqa-sharded"
        write_model(single, GQA_DIMS, seed=3)
        write_model(sharded, GQA_DIMS, seed=3, shards=3)
        ids = [5, 1000, 17, 256, 3]
        a, _ = run_ref(single, ids, out=self.t / "gqa.npz")
        b, _ = run_ref(sharded, ids, out=self.t / "gqa-sh.npz")
        self.assertEqual(a["logits"].tobytes(), b["logits"].tobytes())
        naive, _ = naive_forward(single, ids)
        self.assertLess(nmse(a["logits"], naive), 1e-10)
        # A wrong head grouping (h % kv instead of h // (heads/kv)) must be detectable here.
        self.assertGreater(a["logits"].std(), 0.1)

    def test_untied_head(self):
        d = self.t / "untied"
        write_model(d, UNTIED_DIMS, seed=4)
        ids = [1, 2, 3, 1999]
        a, _ = run_ref(d, ids, out=self.t / "untied.npz")
        naive, _ = naive_forward(d, ids)
        self.assertLess(nmse(a["logits"], naive), 1e-10)
        # The head must really be lm_head, not the embedding.
        W = naive_read(d)
        _l, inter = naive_forward(d, ids)
        self.assertGreater(nmse(W["model.embed_tokens.weight"] @ inter["final_norm"][-1], naive), 0.1)

    def test_errors_are_one_line(self):
        cases = [(self.model, [self.cfg["vocab_size"]]), (self.t / "no-such-model", [1, 2])]
        for model, ids in cases:
            with self.subTest(model=str(model), ids=ids):
                r = run_ref(model, ids, subprocess_run=True)
                self.assertNotEqual(r.returncode, 0)
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("torch_reference: error:"), lines[0])


class NaiveImplementationSelfTest(unittest.TestCase):
    """The naive implementation's own pieces, so a shared mistake cannot hide."""

    def test_rope_rotates_pairs(self):
        v = np.arange(8, dtype=np.float64) + 1.0
        np.testing.assert_allclose(naive_rope(v, 0, 10000.0), v)
        r = naive_rope(v, 3, 10000.0)
        self.assertAlmostEqual(np.linalg.norm(r), np.linalg.norm(v))
        # Pair (0, 4) rotates by angle 3 (frequency 1); pair (1, 5) by 3 * 10000^(-1/4).
        self.assertAlmostEqual(r[0], v[0] * math.cos(3) - v[4] * math.sin(3))
        self.assertAlmostEqual(r[4], v[4] * math.cos(3) + v[0] * math.sin(3))
        a = 3 * 10000.0 ** -0.25
        self.assertAlmostEqual(r[5], v[5] * math.cos(a) + v[1] * math.sin(a))

    def test_bf16(self):
        self.assertEqual(naive_bf16(np.array([1.00390625]))[0], 1.0)        # halfway, even stays
        self.assertEqual(naive_bf16(np.array([1.01171875]))[0], 1.015625)   # halfway, odd rounds up
        self.assertEqual(naive_bf16(np.array([-1.0039065]))[0], -1.0078125)  # just above halfway


if __name__ == "__main__":
    unittest.main()
