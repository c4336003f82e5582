#!/usr/bin/python3
"""The PyTorch side of bench/attention.cpp: causal multi-head self-attention forward + backward with
torch.nn.MultiheadAttention(batch_first=True), need_weights=False, a causal bool attn_mask, float32.

  /usr/bin/python3 bench/attention_torch.py --serve          one request a line on stdin, one answer a line:
      ping                     -> 1
      run B T D H threads      -> ms of one forward+backward (the module is built once per shape)
  /usr/bin/python3 bench/attention_torch.py --peak B T D H   prints `peak_mib X`: the VmHWM increment of one
                                                             forward+backward in this fresh process
"""
import sys
import time

import torch


def vm_hwm_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


class Case:
    def __init__(self, B, T, D, H):
        torch.manual_seed(0)
        self.mha = torch.nn.MultiheadAttention(D, H, dropout=0.0, bias=True, batch_first=True)
        self.x = torch.randn(B, T, D, requires_grad=True)
        self.mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # True = not allowed

    def run(self):
        out, _ = self.mha(self.x, self.x, self.x, attn_mask=self.mask, need_weights=False)
        out.sum().backward()
        self.mha.zero_grad(set_to_none=True)
        self.x.grad = None


def serve():
    cases = {}
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "ping":
            print(1, flush=True)
            continue
        B, T, D, H, threads = map(int, words[1:6])
        torch.set_num_threads(threads)
        key = (B, T, D, H)
        if key not in cases:
            cases.clear()
            cases[key] = Case(B, T, D, H)
        t0 = time.perf_counter()
        cases[key].run()
        print(f"{1e3 * (time.perf_counter() - t0):.3f}", flush=True)


def peak(B, T, D, H):
    torch.set_num_threads(1)
    case = Case(B, T, D, H)
    before = vm_hwm_kib()
    case.run()
    print(f"peak_mib {(vm_hwm_kib() - before) / 1024:.1f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve()
    elif len(sys.argv) == 6 and sys.argv[1] == "--peak":
        peak(*map(int, sys.argv[2:6]))
    else:
        sys.exit(__doc__)
