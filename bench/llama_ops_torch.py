#!/usr/bin/python3
"""The PyTorch side of bench/llama_ops.cpp: forward + backward, in eager mode, of Llama's memory-bound ops
from a fixed random output gradient:
  rms_norm  torch.nn.RMSNorm(cols, eps=1e-6) on x (rows, cols);
  rope      the rotate-half formula as transformers' modeling_llama writes it (apply_rotary_pos_emb),
            x * cos + rotate_half(x) * sin, on x (1, cols / 64, rows, 64), its (rows, 64) cos and sin tables
            (theta 10000, computed in float32 as transformers' LlamaRotaryEmbedding does, then cast to x's dtype)
            computed once;
  swiglu    F.silu(gate) * up on gate, up (rows, cols).

  python3 bench/llama_ops_torch.py --serve     one request a line on stdin, one answer a line:
      ping                                  -> 1
      op NAME DTYPE ROWS COLS threads       -> ms of one forward + backward of NAME (rms_norm, rope, swiglu)
                                               on DTYPE (f32 or bf16) tensors; the case is built once
  python3 bench/llama_ops_torch.py --check NAME ROWS COLS DIR
      reads the float32 inputs `llama_ops --check` wrote to DIR (a.bin: x or gate; b.bin: rms_norm's weight or
      swiglu's up; cos.bin, sin.bin: rope's (rows, 32) tables, repeated over the two halves here as
      transformers does; g.bin: the output gradient), runs NAME's forward + backward in float32 and writes
      out_torch.bin, da_torch.bin (and db_torch.bin: the weight's or up's gradient) as float32.
"""
import sys

import torch
import torch.nn.functional as F
from attention_torch import serve  # the same request loop as attention's twin

HEAD_DIM = 64


def rotate_half(x):
    """transformers' modeling_llama.rotate_half: the second half of the last dim, negated, then the first."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(rows, dtype, theta=10000.0):
    """cos, sin (rows, 64) as transformers' LlamaRotaryEmbedding makes them (float32 angles, cat(freqs, freqs))."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
    freqs = torch.outer(torch.arange(rows).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class OpCase:
    """One op on given tensors: a (x or gate), b (rms_norm's weight, swiglu's up; None for rope), g (the output
    gradient), and rope's (rows, 64) tables."""

    def __init__(self, name, a, b, g, cos=None, sin=None):
        self.name, self.g, self.cos, self.sin = name, g, cos, sin
        self.a = a.requires_grad_()
        self.b = b
        if name == "rms_norm":
            self.norm = torch.nn.RMSNorm(a.size(-1), eps=1e-6, dtype=a.dtype)
            with torch.no_grad():
                self.norm.weight.copy_(b)
            self.b = self.norm.weight
        elif name == "swiglu":
            self.b.requires_grad_()

    @staticmethod
    def random(name, dtype, rows, cols):
        torch.manual_seed(0)
        dt = torch.bfloat16 if dtype == "bf16" else torch.float32
        shape = (1, cols // HEAD_DIM, rows, HEAD_DIM) if name == "rope" else (rows, cols)
        a, g = torch.randn(shape).to(dt), torch.randn(shape).to(dt)
        if name == "rope":
            return OpCase(name, a, None, g, *rope_tables(rows, dt))
        return OpCase(name, a, torch.randn(cols if name == "rms_norm" else shape).to(dt), g)

    def forward(self):
        if self.name == "rms_norm":
            return self.norm(self.a)
        if self.name == "rope":
            return self.a * self.cos + rotate_half(self.a) * self.sin
        return F.silu(self.a) * self.b

    def run(self):
        self.forward().backward(self.g)
        self.a.grad = None
        if self.b is not None:
            self.b.grad = None


def make_case(words):
    """The case of a request `op NAME DTYPE ROWS COLS threads` (None for rms_norm before torch 2.4: no RMSNorm)."""
    if words[1] == "rms_norm" and not hasattr(torch.nn, "RMSNorm"):
        return None
    return OpCase.random(words[1], words[2], int(words[3]), int(words[4]))


def check(name, rows, cols, folder):
    import numpy as np

    shape = (1, cols // HEAD_DIM, rows, HEAD_DIM) if name == "rope" else (rows, cols)

    def load(what, shape):
        return torch.from_numpy(np.fromfile(f"{folder}/{what}.bin", dtype="<f4").reshape(shape))

    a, g = load("a", shape), load("g", shape)
    if name == "rope":
        cos, sin = (load(t, (rows, HEAD_DIM // 2)) for t in ("cos", "sin"))
        case = OpCase(name, a, None, g, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))
    else:
        case = OpCase(name, a, load("b", cols if name == "rms_norm" else shape), g)
    out = case.forward()
    out.backward(case.g)
    results = {"out": out, "da": case.a.grad}
    if case.b is not None:
        results["db"] = case.b.grad
    for what, t in results.items():
        t.detach().float().numpy().tofile(f"{folder}/{what}_torch.bin")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(make_case)
    elif len(sys.argv) == 6 and sys.argv[1] == "--check":
        check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)
