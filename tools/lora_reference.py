#!/usr/bin/python3
"""lora_reference.py: the PyTorch autograd reference for Kipp's LoRA training model.

train_reference.py's float32 Qwen3 decoder with its weights frozen and, on each projection
an adapter names, the LoRA update written out by hand (no peft package):

    y = x W^T + (alpha / rank) * (x A^T) B^T       A [rank, in], B [out, rank]

Inputs: --config (HF-style config.json), --weights (the base as safetensors with HF names, FP32
or BF16: the caller dequantizes a quantized base exactly as stored), --adapters (safetensors
with PEFT's names, "base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight" ...; the
projections adapted are those named there) with --alpha, or a PEFT adapter folder
(adapter_config.json gives lora_alpha, r and target_modules; adapter_model.safetensors).
Two outputs (--out):
  --batch (int32 "inputs" and "targets" [batch, seq]): FP32 safetensors of the gradient of
    every lora_A and lora_B of the summed cross-entropy over targets != -1, with "loss_sum" and
    "counted" in the metadata. No dropout: the gradient gate runs without it.
  --ids (token ids, comma or space separated): the float32 logits of every position with the
    adapters applied unmerged, raw little-endian [n][vocab] as `kipp logits --all -o` writes.
"""

import argparse
import json
import os
import re
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_reference as ref  # noqa: E402  (the model, safetensors and batch reading)

_ADAPTER = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


class LoraLinear(nn.Module):
    """A frozen nn.Linear plus scale * B A."""

    def __init__(self, base, a, b, scale):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.from_numpy(a))
        self.lora_B = nn.Parameter(torch.from_numpy(b))
        self.scale = scale

    def forward(self, x):
        return self.base(x) + self.scale * ((x @ self.lora_A.t()) @ self.lora_B.t())


def read_adapters(args):
    """(tensors, alpha) from --adapters: a safetensors file with --alpha, or a PEFT folder."""
    if not os.path.isdir(args.adapters):
        if args.alpha is None:
            raise ref.RefError(f"{args.adapters} is a file: --alpha is needed")
        return ref.read_safetensors(args.adapters), args.alpha
    with open(os.path.join(args.adapters, "adapter_config.json")) as f:
        config = json.load(f)
    try:
        rank, alpha, targets = int(config["r"]), float(config["lora_alpha"]), set(config["target_modules"])
    except (KeyError, TypeError) as e:
        raise ref.RefError(f"{args.adapters}/adapter_config.json: bad or missing field {e}") from None
    tensors = ref.read_safetensors(os.path.join(args.adapters, "adapter_model.safetensors"))
    for name, value in tensors.items():
        match = _ADAPTER.match(name)
        if match and (match.group(3) not in targets or value.shape[1 if match.group(4) == "B" else 0] != rank):
            raise ref.RefError(f"{args.adapters}: {name} {list(value.shape)} does not fit r {rank} "
                               f"and target_modules {sorted(targets)}")
    return tensors, alpha


def apply_adapters(model, adapters, alpha, source):
    """Wraps every projection the adapter tensors name; returns {tensor name: its Parameter}."""
    pairs = {}
    for name, value in adapters.items():
        match = _ADAPTER.match(name)
        if not match:
            raise ref.RefError(f"{source}: {name} is not a PEFT LoRA tensor name")
        layer, parent, module, which = match.groups()
        pairs.setdefault((int(layer), parent, module), {})[which] = (name, value)
    wrapped = {}
    for (layer, parent, module), pair in sorted(pairs.items()):
        if set(pair) != {"A", "B"}:
            raise ref.RefError(f"{source}: layer {layer} {module} lacks lora_A or lora_B")
        (a_name, a), (b_name, b) = pair["A"], pair["B"]
        rank = a.shape[0]
        owner = getattr(model.model.layers[layer], parent)
        lora = LoraLinear(getattr(owner, module), a, b, alpha / rank)
        setattr(owner, module, lora)
        wrapped[a_name] = lora.lora_A
        wrapped[b_name] = lora.lora_B
    return wrapped


def run(args):
    with open(args.config) as f:
        cfg = ref.Config(json.load(f))
    model = ref.build_model(cfg, args.weights)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters, alpha = read_adapters(args)
    wrapped = apply_adapters(model, adapters, alpha, args.adapters)
    if args.ids is not None:
        ids = [int(t) for t in args.ids.replace(",", " ").split()]
        if not ids or not all(0 <= t < cfg.vocab for t in ids):
            raise ref.RefError(f"--ids must be token ids below {cfg.vocab}")
        with torch.no_grad():
            logits = model.logits(torch.tensor([ids], dtype=torch.int64))[0]
        logits.numpy().astype("<f4").tofile(args.out)
        print(f"lora logits: {len(ids)} positions, {len(wrapped) // 2} adapters")
        return
    inputs, targets = ref.load_batch(args.batch, 2)
    loss = model(inputs, targets)
    loss.backward()
    grads = {name: p.grad.numpy() for name, p in wrapped.items()}
    counted = int((targets != -1).sum())
    ref.write_safetensors(args.out, grads, {"loss_sum": repr(float(loss)), "counted": counted})
    print(f"lora grad: loss_sum {float(loss):.9g} over {counted} targets, {len(wrapped) // 2} adapters")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--weights", required=True)
    parser.add_argument("--adapters", required=True)
    parser.add_argument("--alpha", type=float, help="LoRA alpha (when --adapters is a file)")
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--batch", help="safetensors with int32 inputs and targets: write the LoRA gradients")
    output.add_argument("--ids", help="token ids: write the logits of every position")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        run(args)
    except (ref.RefError, OSError, ValueError) as e:
        print(f"lora_reference.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
