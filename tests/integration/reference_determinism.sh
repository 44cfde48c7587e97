#!/usr/bin/env bash
# Runs the PyTorch reference twice on a model (last-position logits and, with K/V rounded to
# BF16, all positions plus intermediates) and requires bitwise-identical results.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
model="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ids="151644,872,198,3838,374,220,17,10"
for run in 1 2; do
  /usr/bin/python3 "$source_dir/tools/torch_reference.py" --model "$model" --ids "$ids" \
    --all-positions --round-kv-bf16 --dump-intermediates --out "$work/run$run.npz"
done
/usr/bin/python3 - "$work/run1.npz" "$work/run2.npz" <<'PY'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
for key in a.files:
    assert a[key].tobytes() == b[key].tobytes(), f"{key} differs between runs"
logits = a["logits"]
assert logits.shape[0] == 8 and logits.shape[-1] == 151936, logits.shape
assert np.isfinite(logits).all() and logits[-1].std() > 1.0, "logits are flat or not finite"
print("deterministic:", ", ".join(f"{k}{list(a[k].shape)}" for k in sorted(a.files)))
PY
