#!/usr/bin/env bash
# `kipp lora merge` on the tiny synthetic model with an adapter written here the way PEFT saves
# one (".default" names, BF16, four of the seven targets): the merged folder is checked against
# W0 + (alpha / r) B A computed independently (tools/lora_merge_check.py, bit for bit), the GGUF
# base gives the same weights as the HF folder it was converted from, the result converts to a
# GGUF that `kipp logits` and `kipp generate` run, and each refusal is one clear error.
# Usage: lora_merge.sh KIPP SOURCE_DIR MODELS_DIR WORK_DIR
set -euo pipefail
kipp=$1 source_dir=$2 models=$3 work=$4
expect_error="$source_dir/tests/integration/expect_error.sh"
rm -rf "$work"
mkdir -p "$work"

# make_adapter DIR HIDDEN: r 4, alpha 8, random A and B, q/v/gate/down of a 2-layer model of
# the tiny model's widths except hidden (so a wrong HIDDEN makes an adapter for another model).
make_adapter() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, os, random, struct, sys
from array import array
out, hidden = sys.argv[1], int(sys.argv[2])
q_width, kv_width, ffn, rank = 1024, 1024, 512, 4
shapes = {"self_attn.q_proj": (q_width, hidden), "self_attn.v_proj": (kv_width, hidden),
          "mlp.gate_proj": (ffn, hidden), "mlp.down_proj": (hidden, ffn)}
rng = random.Random(7)
tensors = {}
for layer in range(2):
    for module, (rows, cols) in shapes.items():
        prefix = "base_model.model.model.layers.%d.%s" % (layer, module)
        tensors[prefix + ".lora_A.default.weight"] = [rank, cols]
        tensors[prefix + ".lora_B.default.weight"] = [rows, rank]
header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
for name, shape in tensors.items():
    floats = array("f", (rng.uniform(-0.05, 0.05) for _ in range(shape[0] * shape[1])))
    blob = array("H", (b >> 16 for b in array("I", floats.tobytes()))).tobytes()
    header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "adapter_model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 8, "lora_dropout": 0.05,
           "target_modules": ["q_proj", "v_proj", "gate_proj", "down_proj"], "bias": "none", "fan_in_fan_out": False,
           "use_rslora": False, "modules_to_save": None, "base_model_name_or_path": "tiny-hf"},
          open(os.path.join(out, "adapter_config.json"), "w"))
PY
}

make_adapter "$work/adapter" 256
"$kipp" lora merge "$models/tiny-hf" "$work/adapter" -o "$work/merged"
/usr/bin/python3 "$source_dir/tools/lora_merge_check.py" "$models/tiny-hf" "$work/adapter" "$work/merged"

# The GGUF converted from the same folder merges to the same bytes (its tokenizer given).
"$expect_error" "no tokenizer.json in .*--tokenizer" \
  "$kipp" lora merge "$models/tiny-bf16.gguf" "$work/adapter" -o "$work/merged-gguf"
"$kipp" lora merge "$models/tiny-bf16.gguf" "$work/adapter" -o "$work/merged-gguf" --tokenizer "$models/tiny-hf"
cmp "$work/merged/model.safetensors" "$work/merged-gguf/model.safetensors"
echo "PASS: the GGUF base merges to the HF base's bytes"

"$kipp" convert "$work/merged" -o "$work/merged.gguf"
"$kipp" logits -m "$work/merged.gguf" --prompt "Hello" >"$work/logits.txt"
"$kipp" generate -m "$work/merged.gguf" -p "Hello" --temp 0 --max-tokens 8 >"$work/generated.txt"
echo "PASS: the merged folder converts and runs"

# Refusals, one error each.
"$expect_error" "merged already exists" "$kipp" lora merge "$models/tiny-hf" "$work/adapter" -o "$work/merged"
make_adapter "$work/adapter-wide" 128
"$expect_error" "tensor base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight has shape \[4, 128\].*another model" \
  "$kipp" lora merge "$models/tiny-hf" "$work/adapter-wide" -o "$work/never"
mkdir -p "$work/adapter-empty"
cp "$work/adapter/adapter_config.json" "$work/adapter-empty/"
"$expect_error" "adapter_model.safetensors" "$kipp" lora merge "$models/tiny-hf" "$work/adapter-empty" -o "$work/never"
"$expect_error" "adapter_config.json" "$kipp" lora merge "$models/tiny-hf" "$work/nowhere" -o "$work/never"
"$expect_error" "BASE no/such/base: no such file or folder" \
  "$kipp" lora merge no/such/base "$work/adapter" -o "$work/never"
[[ ! -e "$work/never" ]] || { echo "FAIL: a refused merge left $work/never" >&2; exit 1; }
echo "PASS: each refusal is one error"
