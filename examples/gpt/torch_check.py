#!/usr/bin/python3
"""Loads a checkpoint of examples/gpt (byte tokenizer, default sizes) into the PyTorch twin of
bench/gpt_step_torch.py with load_state_dict(strict=True) (the tied output layer is wte.weight, stored once)
and prints its greedy continuation of "\\n%\\n", to compare with saccade's:

  python3 examples/gpt/torch_check.py out/gpt/best.safetensors      # needs torch and safetensors
  python3 examples/gpt/torch_check.py out/gpt/best_bf16.safetensors # `gpt export`'s bfloat16 file: the same
  build/examples/gpt/gpt sample --out out/gpt --prompt $'\\n%\\n' --max-new-tokens 60 --temperature 0
"""
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import gpt_step_torch  # noqa: E402

state = {k: v for k, v in load_file(sys.argv[1]).items() if not k.startswith(("optimizer.", "scaler."))}
print("dtypes in the file:", sorted({str(v.dtype) for v in state.values()}))
model = gpt_step_torch.GPT(0.0).eval()
print(model.load_state_dict(state, strict=True))  # copies bfloat16 values into the float32 parameters
idx = torch.tensor([list(b"\n%\n")])
with torch.no_grad():
    for _ in range(60):
        idx = torch.cat([idx, model(idx[:, -128:])[:, -1].argmax(-1, keepdim=True)], 1)
print(bytes(idx[0].tolist()).decode("utf-8", "replace"))
