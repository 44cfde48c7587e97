#!/usr/bin/env bash
# `kipp train --init SOURCE` with a config that has no model section: two steps run, and the
# checkpoint's config.json has the source's dimensions and constants (compared with the
# config.json the source was made from). The run also gives two model keys equal to the
# source's, which must be accepted.
# Usage: train_init_source.sh KIPP CONFIG CORPUS SOURCE SOURCE_CONFIG_JSON WORK_DIR [SETS...]
set -euo pipefail
kipp=$1 config=$2 corpus=$3 source=$4 source_config=$5 work=$6
shift 6
rm -rf "$work"
field() { /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$1" "$2"; }
theta=$(field "$source_config" rope_theta)
tied=$(field "$source_config" tie_word_embeddings)
"$kipp" train --plain --config "$config" --init "$source" "$@" \
  --set data.format=text --set "data.train=[$corpus]" --set "data.cache_dir=$work/cache" \
  --set "run.dir=$work/run" --set train.seq_len=32 --set train.micro_batch=1 --set train.grad_accum=1 \
  --set train.max_steps=2 --set train.warmup_steps=1 --set train.recompute_blocks=false \
  --set eval.every=0 --set "eval.sample_prompts=[]" --set checkpoint.every=0 \
  --set "model.rope_theta=$theta" --set "model.weight_tying=$tied"
# Compared as JSON values, so 1000000 and 1000000.0 are the same rope_theta.
/usr/bin/python3 - "$source_config" "$work/run/latest/config.json" <<'PY'
import json, sys
keys = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "intermediate_size", "vocab_size", "max_position_embeddings", "rope_theta", "rms_norm_eps",
        "tie_word_embeddings"]
want, got = ([json.load(open(path))[k] for k in keys] for path in sys.argv[1:3])
print("source:    ", want)
print("checkpoint:", got)
if want != got:
    sys.exit("FAIL: the checkpoint's config differs from the source's")
print("PASS")
PY
