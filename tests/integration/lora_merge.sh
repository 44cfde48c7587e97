#!/usr/bin/env bash
# `kipp lora merge` on the tiny synthetic model with an adapter written here the way PEFT saves
# one (".default" names, BF16, four of the seven targets): the merged folder is checked against
# W0 + (alpha / r) B A computed independently (tools/lora_merge_check.py, bit for bit), the GGUF
# base gives the same weights as the HF folder it was converted from, the result converts to a
# GGUF that `kipp logits` and `kipp generate` run, `kipp eval --adapter` scores the base with the
# adapter folded in exactly as the folder merged from an F32 copy of the base scores (and not as
# the base itself), and each refusal is one clear error.
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

# kipp eval: an F32 copy of the base (so the merge is not rounded to BF16), the base, the base
# with the adapter, and the merge of the copy; the loss is the first number of the result line.
mkdir -p "$work/base-f32"
cp "$models/tiny-hf/"*.json "$work/base-f32/"
/usr/bin/python3 - "$models/tiny-hf/model.safetensors" "$work/base-f32/model.safetensors" <<'PY'
import json, struct, sys
from array import array
with open(sys.argv[1], "rb") as f:
    size = struct.unpack("<Q", f.read(8))[0]
    header, body = json.loads(f.read(size)), f.read()
out_header, blobs, offset = {"__metadata__": header.get("__metadata__", {})}, [], 0
for name, info in header.items():
    if name == "__metadata__":
        continue
    begin, end = info["data_offsets"]
    raw = body[begin:end]
    assert info["dtype"] == "BF16", name
    blob = array("I", (h << 16 for h in array("H", raw))).tobytes()
    out_header[name] = {"dtype": "F32", "shape": info["shape"], "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
"$kipp" lora merge "$work/base-f32" "$work/adapter" -o "$work/merged-f32" >/dev/null
for i in $(seq 60); do echo "Line $i of a held-out text, with words the tiny model has seen."; done >"$work/held-out.txt"
eval_loss() {
  "$kipp" eval "$@" --data "$work/held-out.txt" --seq-len 32 --cache-dir "$work/eval-cache" 2>/dev/null |
    awk '/^loss /{print $2}'
}
base_loss=$(eval_loss -m "$models/tiny-hf")
adapter_loss=$(eval_loss -m "$work/base-f32" --adapter "$work/adapter")
merged_loss=$(eval_loss -m "$work/merged-f32")
echo "eval loss: base $base_loss, base + adapter $adapter_loss, merged $merged_loss"
[[ -n "$adapter_loss" && "$adapter_loss" == "$merged_loss" ]] || { echo "FAIL: eval --adapter differs from the merged folder" >&2; exit 1; }
[[ "$adapter_loss" != "$base_loss" ]] || { echo "FAIL: eval --adapter scores as the base: adapter not applied" >&2; exit 1; }
echo "PASS: kipp eval --adapter scores as the merged folder"

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
"$expect_error" "error: --adapter .*adapter-wide: .*another model" \
  "$kipp" eval -m "$models/tiny-hf" --adapter "$work/adapter-wide" --data "$work/held-out.txt"
"$expect_error" "adapter is a LoRA adapter folder, not a model: .*--adapter" \
  "$kipp" eval -m "$work/adapter" --data "$work/held-out.txt"
[[ ! -e "$work/never" ]] || { echo "FAIL: a refused merge left $work/never" >&2; exit 1; }
echo "PASS: each refusal is one error"
