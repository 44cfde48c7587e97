#!/usr/bin/env bash
# `kipp logits` against the PyTorch reference on one prompt: the printed argmax must be the
# reference's, and the saved last-position logits within NMSE BOUND (default 5e-5) of it
# (deep random-weight models need more: see DeepBounds in engine_gates.cpp).
# INPUTS says what the kernel table in use multiplies, and so what the reference computes:
# "bf16" (default; the fast tables) rounds every product's input to BF16, "fp32" (the
# reference table, KIPP_KERNELS=reference) keeps the FP32 activations.
# Usage: logits_cli_vs_reference.sh KIPP MODEL.gguf HF_DIR REFERENCE_SCRIPT SCRATCH_DIR [BOUND [INPUTS]]
set -euo pipefail
kipp="$1" gguf="$2" hf="$3" reference="$4" scratch="$5" bound="${6:-5e-5}" inputs="${7:-bf16}"
case "$inputs" in
  bf16) round_inputs=--round-inputs-bf16 ;;
  fp32) round_inputs= ;;
  *) echo "logits_cli_vs_reference.sh: INPUTS must be bf16 or fp32, not '$inputs'" >&2; exit 2 ;;
esac
rm -rf "$scratch" && mkdir -p "$scratch"
prompt='<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
'
ids="$("$kipp" tokenize -m "$gguf" --no-verify --text "$prompt" | tr ' ' ',')"
"$kipp" logits -m "$gguf" --no-verify --ids "$ids" -o "$scratch/kipp.f32" | tee "$scratch/kipp.txt"
/usr/bin/python3 "$reference" --model "$hf" --ids "$ids" --round-kv-bf16 $round_inputs --threads 1 --out-dir "$scratch/ref" >/dev/null
/usr/bin/python3 - "$scratch" "$bound" <<'PY'
import re, sys
import numpy as np
scratch, bound = sys.argv[1], float(sys.argv[2])
ref = np.load(f"{scratch}/ref/logits.npy").astype(np.float64)
ours = np.fromfile(f"{scratch}/kipp.f32", dtype="<f4").astype(np.float64)
printed = int(re.search(r"^argmax: (\d+) ", open(f"{scratch}/kipp.txt").read(), re.M).group(1))
nmse = float(((ours - ref) ** 2).sum() / (ref ** 2).sum())
ok = printed == int(ref.argmax()) == int(ours.argmax()) and nmse <= bound
print(f"kipp argmax {printed}, saved argmax {int(ours.argmax())}, reference argmax {int(ref.argmax())}, "
      f"NMSE {nmse:.3g}: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
