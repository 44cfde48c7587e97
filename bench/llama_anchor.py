#!/usr/bin/env python3
"""Kipp beside llama.cpp on one host: for each GGUF, llama-bench then `kipp bench` on the same file,
alternating, each result written as a JSON document of its own (llama-bench's records wrapped with
the machine facts and the command; `kipp bench --json FILE` as it writes it). bench/cpu_summary.py
--llama takes the llama-bench documents as the anchors of the kipp ones.

Usage: bench/llama_anchor.py --llama-bench PATH --llama-cmake "FLAGS" --out-dir DIR
           [--kernels TABLE] [--threads 2] [--kipp build/release/kipp] MODEL.gguf ...
--kernels sets KIPP_KERNELS for kipp (e.g. avx2 to run the AVX2 table on an AVX-512 host, beside a
llama.cpp built without AVX-512); --llama-cmake records how llama.cpp was configured.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_facts import machine_facts  # noqa: E402


def weights_label(model):
    """The file's weight type as the result names say it (qwen3-0.6b-bf16.gguf -> 0.6b-bf16)."""
    base = os.path.basename(model)
    match = re.match(r"(?:qwen3-)?(.+)\.gguf$", base)
    if not match:
        sys.exit(f"llama_anchor: {model}: expected a .gguf file")
    return match.group(1)


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return {name: name in flags for name in ("avx2", "fma", "avx_vnni", "avx512f", "avx512_bf16",
                                                          "avx512_vnni", "amx_bf16")}
    return {}


def run_llama(args, model, out):
    command = [args.llama_bench, "-m", model, "-p", args.prompt_lens, "-n", str(args.gen), "-t", str(args.threads),
               "-r", str(args.repeats), "-o", "json"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"llama_anchor: llama-bench failed on {model}:\n{result.stderr[-2000:]}")
    document = {
        "program": "llama-bench",
        "command": " ".join(["llama-bench"] + command[1:]),
        "build": {"source": "llama.cpp at commit 34af94cd, built out of tree", "cmake": args.llama_cmake},
        "machine": dict(machine_facts(), flags=cpu_flags()),
        "date": datetime.date.today().isoformat(),
        "results": json.loads(result.stdout),
    }
    with open(out, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def run_kipp(args, model, out):
    command = [args.kipp, "bench", "-m", model, "--prompt-len", args.prompt_lens, "--gen", str(args.gen),
               "--repeats", str(args.repeats), "--batch", "8", "--threads", str(args.threads), "--json", out]
    env = dict(os.environ)
    if args.kernels:
        env["KIPP_KERNELS"] = args.kernels
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"llama_anchor: kipp bench failed on {model}:\n{result.stderr[-2000:]}")
    with open(out) as f:
        document = json.load(f)
    if args.kernels and document["engine"]["kernels"] != args.kernels:
        sys.exit(f"llama_anchor: kipp ran the {document['engine']['kernels']} table, not {args.kernels}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", metavar="MODEL.gguf")
    parser.add_argument("--llama-bench", required=True, help="the llama-bench binary")
    parser.add_argument("--llama-cmake", required=True, help="the CMake flags llama.cpp was built with")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--kernels", default="", help="KIPP_KERNELS for kipp (default: the CPU's best table)")
    parser.add_argument("--kipp", default="build/release/kipp")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-lens", default="64,512")
    parser.add_argument("--gen", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for model in args.models:
        if not os.path.isfile(model):
            sys.exit(f"llama_anchor: {model}: no such file")
        label = f"{weights_label(model)}-threads{args.threads}"
        llama_out = os.path.join(args.out_dir, f"llama-bench-{label}.json")
        kipp_out = os.path.join(args.out_dir, f"cpu-{label}.json")
        print(f"llama_anchor: {model}: llama-bench", file=sys.stderr, flush=True)
        run_llama(args, model, llama_out)
        print(f"llama_anchor: {model}: kipp bench", file=sys.stderr, flush=True)
        run_kipp(args, model, kipp_out)
        with open(llama_out) as f:
            document = json.load(f)
        document["alternated_with"] = f"{kipp_out} (run right after this one)"
        with open(llama_out, "w") as f:
            json.dump(document, f, indent=1)
            f.write("\n")
        print(f"llama_anchor: wrote {llama_out} and {kipp_out}", file=sys.stderr)


if __name__ == "__main__":
    main()
