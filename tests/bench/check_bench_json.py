#!/usr/bin/env python3
"""Checks a `kipp bench --json` document: every key is there, each median lies between its min
and max, and the derived figures (bytes read per decode token, prefill FLOPs, K/V sizes) equal
formulas recomputed here from the model's config and quantization scheme alone, not from the
tensors kipp read them from.

usage: check_bench_json.py FILE --prompt-len 8,16 --gen 4 --batch 2
"""
import argparse
import json
import math
import sys

# Bytes per element of the projections, by kipp.quant.scheme (ggml block layouts: Q8_0 is 32
# int8 + an fp16 scale, Q4_1 (affine4) 32 nibbles + fp16 scale and minimum).
PROJECTION_BYTES = {"bf16": 2.0, "q8_0": 34 / 32, "affine4_gs32": 20 / 32}
BLOCK_POSITIONS = 32
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def close(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def dig(doc, path):
    node = doc
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise KeyError(path)
        node = node[key]
    return node


def cpu_signature_from_proc():
    """"family F model M stepping S" of the first processor, or "" where /proc/cpuinfo has no family."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return ""
    if "cpu family" not in fields or "model" not in fields:
        return ""
    stepping = f" stepping {fields['stepping']}" if fields.get("stepping") else ""
    return f"family {fields['cpu family']} model {fields['model']}{stepping}"


def check_spread(spread, where):
    numbers = all(isinstance(spread.get(key), (int, float)) and spread[key] > 0 for key in ("median", "min", "max"))
    check(numbers, f"{where}: median, min and max are not all positive numbers")
    if numbers:
        check(spread["min"] <= spread["median"] <= spread["max"], f"{where}: median {spread['median']} not in "
              f"[{spread['min']}, {spread['max']}]")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--prompt-len", required=True)
    parser.add_argument("--gen", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    args = parser.parse_args()
    lengths = [int(x) for x in args.prompt_len.split(",")]
    with open(args.file, encoding="utf-8") as f:
        doc = json.load(f)

    required = ["command", "machine.cpu", "machine.cpu_signature", "machine.hardware_threads", "machine.memory_bytes",
                "machine.flags.avx2", "machine.flags.avx512f", "machine.flags.avx512_bf16",
                "machine.flags.avx512_vnni", "model.path", "model.file_bytes", "model.quant_scheme",
                "model.projection_dtype", "model.config.hidden_size", "engine.kernels", "engine.threads",
                "probes.read_bandwidth.best_gb_per_second", "probes.read_bandwidth.median_gb_per_second",
                "probes.peak_multiply_add", "prefill", "decode.tokens_per_second", "decode.bytes_per_token",
                "decode.achieved_gb_per_second", "decode.bandwidth_alongside.best_gb_per_second",
                "decode.bandwidth_alongside.median_gb_per_second", "decode.bandwidth_alongside.passes",
                "decode.bandwidth_fraction", "decode.bandwidth_fraction_of_best_pass", "decode.bandwidth_fraction_per_token",
                "batch.aggregate_tokens_per_second",
                "batch.speedup_vs_single_sequence", "batch.speedup_per_step", "memory.rss_bytes", "memory.peak_rss_bytes",
                "memory.kv_bytes_per_token", "memory.kv_bytes_per_session"]
    for path in required:
        try:
            dig(doc, path)
        except KeyError:
            failures.append(f"missing key {path}")
    if failures:
        return report()

    expected_signature = cpu_signature_from_proc()
    check(doc["machine"]["cpu_signature"] == expected_signature,
          f"machine.cpu_signature '{doc['machine']['cpu_signature']}', /proc/cpuinfo says '{expected_signature}'")
    check(" bench " in doc["command"] and "--json" in doc["command"], f"command '{doc['command']}' is not the bench command line")
    c = doc["model"]["config"]
    scheme = doc["model"]["quant_scheme"]
    check(scheme in PROJECTION_BYTES, f"unknown quant scheme {scheme}")
    if failures:
        return report()
    hidden, layers, ffn, vocab = c["hidden_size"], c["num_layers"], c["ffn_size"], c["vocab_size"]
    q_width, kv_width = c["num_heads"] * c["head_dim"], c["num_kv_heads"] * c["head_dim"]

    bw = doc["probes"]["read_bandwidth"]
    check(bw["best_gb_per_second"] > 0 and bw["median_gb_per_second"] > 0, "bandwidth is not positive")
    if failures:
        return report()
    check(bw["median_gb_per_second"] <= bw["best_gb_per_second"] * (1 + 1e-12), "median bandwidth above the best")
    peaks = {p["kind"]: p for p in doc["probes"]["peak_multiply_add"]}
    check("fp32_fma" in peaks, "no fp32_fma peak")
    for kind, peak in peaks.items():
        check(peak["multiply_adds_per_second"] > 0, f"{kind} peak is not positive")
        check(close(peak["flops_per_second"], 2 * peak["multiply_adds_per_second"]), f"{kind}: FLOP/s != 2 x MA/s")
    if failures:
        return report()

    # Prefill: 2 FLOPs per multiply-add over the seven projections per token, causal attention
    # (Q.K and P.V on L(L+1)/2 pairs per head and layer) and the head for the last row.
    projection_mas = layers * (hidden * q_width * 2 + hidden * kv_width * 2 + hidden * ffn * 3)
    check([p["tokens"] for p in doc["prefill"]] == lengths, f"prefill lengths {[p['tokens'] for p in doc['prefill']]} != {lengths}")
    for p in doc["prefill"]:
        L = p["tokens"]
        check_spread(p["tokens_per_second"], f"prefill[{L}].tokens_per_second")
        flops = 2 * (projection_mas * L + 2 * L * (L + 1) / 2 * q_width * layers + vocab * hidden)
        check(close(p["flops"], flops), f"prefill[{L}].flops {p['flops']} != {flops}")
        check(close(p["flops_per_second"], flops * p["tokens_per_second"]["median"] / L), f"prefill[{L}].flops_per_second")
        check(close(p["fraction_of_peak"], p["flops_per_second"] / p["peak_flops_per_second"]), f"prefill[{L}].fraction_of_peak")
        # The peak is that of the instruction the kernel table multiplies the projections with.
        # (AMX integer tiles for 9 rows or more wherever the AMX table runs on a CPU with them, i.e.
        # where kipp bench found the amx_int8 probe to run.)
        amx_table = doc["engine"]["kernels"] == "avx512-amx-bf16"
        bf16_kind = "amx_bf16" if amx_table else "bf16_dot"
        int8_kind = "amx_int8" if amx_table and "amx_int8" in peaks and L >= 9 else "int8_dot"
        wanted = {"bf16": bf16_kind, "q8_0": int8_kind, "q4_1": int8_kind}.get(doc["model"]["projection_dtype"], "fp32_fma")
        if wanted not in peaks:
            wanted = "fp32_fma"
        check(p["peak_kind"] == wanted, f"prefill[{L}].peak_kind {p['peak_kind']} != {wanted}")
        check(close(p["peak_flops_per_second"], peaks[wanted]["flops_per_second"]), f"prefill[{L}].peak_flops_per_second")

    # Decode: every weight once per token (projections in their scheme, norms F32, the BF16
    # head, one BF16 embedding row) plus K/V of all layers at the run's mean context.
    d = doc["decode"]
    check(d["prompt_tokens"] == lengths[0] and d["generated_tokens"] == args.gen, "decode prompt/generated counts")
    check_spread(d["tokens_per_second"], "decode.tokens_per_second")
    projections = projection_mas * PROJECTION_BYTES[scheme]
    norms = layers * (2 * hidden + 2 * c["head_dim"]) * 4 + hidden * 4
    weights = projections + norms + vocab * hidden * 2 + hidden * 2
    check(close(d["weight_bytes_per_token"], weights), f"decode.weight_bytes_per_token {d['weight_bytes_per_token']} != {weights}")
    kv_per_position = layers * 2 * kv_width * 2
    mean_positions = lengths[0] + (args.gen + 1) / 2
    check(close(d["kv_bytes_read_per_token"], kv_per_position * mean_positions), "decode.kv_bytes_read_per_token")
    check(close(d["bytes_per_token"], weights + kv_per_position * mean_positions), "decode.bytes_per_token")
    achieved = d["bytes_per_token"] * d["tokens_per_second"]["median"] / 1e9
    check(close(d["achieved_gb_per_second"], achieved), "decode.achieved_gb_per_second")
    # Against the probe passes taken one after each decode token.
    alongside = d["bandwidth_alongside"]
    check(alongside["passes"] == args.gen, f"decode.bandwidth_alongside.passes {alongside['passes']} != --gen {args.gen}")
    check(0 < alongside["median_gb_per_second"] <= alongside["best_gb_per_second"] * (1 + 1e-12),
          "decode.bandwidth_alongside: median not positive or above the best")
    check(close(d["bandwidth_fraction"], achieved / alongside["median_gb_per_second"]), "decode.bandwidth_fraction")
    check(close(d["bandwidth_fraction_of_best_pass"], achieved / alongside["best_gb_per_second"]),
          "decode.bandwidth_fraction_of_best_pass")
    # Token by token against the pass before it: no token reads fewer bytes than the first,
    # runs slower than the slowest or follows a pass faster than the best.
    paired = d["bandwidth_fraction_per_token"]
    check_spread(paired, "decode.bandwidth_fraction_per_token")
    fewest_bytes = weights + kv_per_position * (lengths[0] + 1)
    check(paired["min"] >= fewest_bytes * d["tokens_per_second"]["min"] / 1e9 / alongside["best_gb_per_second"] * (1 - 1e-9),
          "decode.bandwidth_fraction_per_token below what the slowest token and the best pass allow")

    b = doc["batch"]
    check(b["sequences"] == args.batch and b["steps"] == args.gen, "batch sequences/steps")
    check_spread(b["aggregate_tokens_per_second"], "batch.aggregate_tokens_per_second")
    check_spread(b["speedup_per_step"], "batch.speedup_per_step")
    check(b["speedup_vs_single_sequence"] == b["speedup_per_step"]["median"], "batch.speedup_vs_single_sequence")
    # Each step's ratio is its rate over the decode token's before it: the extremes bound them.
    rate_b, rate_d = b["aggregate_tokens_per_second"], d["tokens_per_second"]
    check(rate_b["min"] / rate_d["max"] * (1 - 1e-9) <= b["speedup_per_step"]["min"]
          and b["speedup_per_step"]["max"] <= rate_b["max"] / rate_d["min"] * (1 + 1e-9),
          "batch.speedup_per_step outside what the batch and decode rates allow")

    m = doc["memory"]
    check(m["rss_bytes"] > 0 and m["peak_rss_bytes"] >= m["rss_bytes"], "memory: RSS not positive or above its peak")
    check(m["kv_bytes_per_token"] == kv_per_position, f"memory.kv_bytes_per_token {m['kv_bytes_per_token']} != {kv_per_position}")
    capacity = lengths[0] + args.gen
    blocks = -(-capacity // BLOCK_POSITIONS)
    check(m["kv_bytes_per_session"] == blocks * BLOCK_POSITIONS * kv_per_position, "memory.kv_bytes_per_session")
    return report()


def report():
    for message in failures:
        print("FAIL:", message)
    if failures:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
