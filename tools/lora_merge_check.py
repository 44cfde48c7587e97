#!/usr/bin/env python3
"""Checks a `kipp lora merge` output against the base and adapter files it was made from,
computed here independently with the standard library only (no numpy needed):

    lora_merge_check.py BASE_HF_DIR ADAPTER_DIR MERGED_DIR

For every targeted projection W = W0 + (lora_alpha / r) * B @ A, with each product of a B and
an A value exact in a Python float (two floats' product fits a double), the r products summed
in order, the scaled sum added to W0 in double, rounded to float32 and then to the base's dtype
(BF16 round to nearest even). Exactness: every merged value must equal this bit for bit. Every
other tensor must be the base's bytes unchanged, and config.json and the tokenizer files must
be the base's. Adapter tensors may be F32, BF16 or F16 and named with or without ".default".
Prints PASS, or FAIL with the first differing tensor and element, and exits 1.
"""
import json
import os
import struct
import sys
from array import array

MODULES = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
           "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    start = 8 + length
    return {name: (info["dtype"], info["shape"], data[start + info["data_offsets"][0]:start + info["data_offsets"][1]])
            for name, info in header.items()}


def to_floats(dtype, raw):
    if dtype == "F32":
        return array("f", raw).tolist()
    halves = array("H", raw)
    if dtype == "BF16":
        return array("f", array("I", (h << 16 for h in halves)).tobytes()).tolist()
    if dtype == "F16":
        return [struct.unpack("<e", struct.pack("<H", h))[0] for h in halves]
    sys.exit("FAIL: unexpected dtype %s" % dtype)


def round_to(dtype, values):
    """float64 values -> float32 -> dtype, as bytes."""
    f32 = array("f", values)  # rounds each double to the nearest float32
    if dtype == "F32":
        return f32.tobytes()
    if dtype == "F16":
        return b"".join(struct.pack("<e", v) for v in f32)
    bits = array("I", f32.tobytes())
    out = array("H", ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 for b in bits))  # no NaN in these weights
    return out.tobytes()


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    base_dir, adapter_dir, merged_dir = sys.argv[1:4]
    config = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    scale = float(config["lora_alpha"]) / float(config["r"])
    rank = int(config["r"])
    base = read_safetensors(os.path.join(base_dir, "model.safetensors"))
    adapter = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    merged = read_safetensors(os.path.join(merged_dir, "model.safetensors"))
    adapter = {name.replace(".default.weight", ".weight"): value for name, value in adapter.items()}

    if sorted(merged) != sorted(base):
        fail("the merged tensors are not the base's: %s" % sorted(set(merged) ^ set(base)))
    merged_count = 0
    for name, (dtype, shape, raw) in sorted(base.items()):
        got_dtype, got_shape, got = merged[name]
        if (got_dtype, got_shape) != (dtype, shape):
            fail("%s is %s %s, the base's is %s %s" % (name, got_dtype, got_shape, dtype, shape))
        parts = name.split(".")
        module = parts[4] if len(parts) == 6 and parts[0] == "model" and parts[1] == "layers" else None
        key = "base_model.model.%s.lora_%%s.weight" % name[:-len(".weight")]
        if module not in config["target_modules"] or (key % "A") not in adapter:
            if got != raw:
                fail("%s is not the base's tensor, although no adapter targets it" % name)
            continue
        a_dtype, a_shape, a_raw = adapter[key % "A"]
        b_dtype, b_shape, b_raw = adapter[key % "B"]
        out, inner = shape
        if a_shape != [rank, inner] or b_shape != [out, rank]:
            fail("%s: adapter shapes %s and %s do not fit %s" % (name, a_shape, b_shape, shape))
        w0, a, b = to_floats(dtype, raw), to_floats(a_dtype, a_raw), to_floats(b_dtype, b_raw)
        expected = []
        for o in range(out):
            row = [0.0] * inner
            for k in range(rank):
                bk = b[o * rank + k]
                ak = a[k * inner:(k + 1) * inner]
                row = [r + bk * x for r, x in zip(row, ak)]
            expected.extend(w + scale * r for w, r in zip(w0[o * inner:(o + 1) * inner], row))
        want = round_to(dtype, expected)
        if got != want:
            size = len(want) // (out * inner)
            first = next(i for i in range(out * inner) if got[i * size:(i + 1) * size] != want[i * size:(i + 1) * size])
            fail("%s element %d: merged %s, expected %s" % (name, first, to_floats(dtype, got[first * size:(first + 1) * size]),
                                                          to_floats(dtype, want[first * size:(first + 1) * size])))
        merged_count += 1
    if merged_count == 0:
        fail("no tensor was merged")
    for file in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        source = os.path.join(base_dir, file)
        if os.path.exists(source) and open(source, "rb").read() != open(os.path.join(merged_dir, file), "rb").read():
            fail("%s differs from the base's" % file)
    print("PASS: %d projections equal W0 + %g * B A rounded once to %s, %d tensors unchanged"
          % (merged_count, scale, dtype, len(base) - merged_count))


if __name__ == "__main__":
    main()
