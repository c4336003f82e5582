#!/usr/bin/python3
"""The loops of bench/overhead.cpp in PyTorch: add of two 16-element float32 tensors with requires_grad.

Prints `forward_ns X` and `forward_backward_ns Y` (best batch of 1000 iterations, ns per iteration), which bench/overhead
reads. Run with /usr/bin/python3 (torch 1.13):  /usr/bin/python3 bench/overhead_torch.py [iterations]
"""
import sys
import time

import torch


BATCH = 1000


def best_ns(f, iters):
    """ns per iteration: the best of iters / BATCH batches of BATCH iterations (as bench/overhead.cpp)."""
    best = float("inf")
    for _ in range(max(1, iters // BATCH)):
        t0 = time.perf_counter_ns()
        f(BATCH)
        best = min(best, (time.perf_counter_ns() - t0) / BATCH)
    return best


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    torch.manual_seed(0)
    a = torch.randn(16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)

    def forward(n):
        for _ in range(n):
            c = a + b

    def forward_backward(n):
        for _ in range(n):
            c = a + b
            c.sum().backward()

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"forward_ns {best_ns(forward, iters):.1f}")
    print(f"forward_backward_ns {best_ns(forward_backward, max(1, iters // 4)):.1f}")


if __name__ == "__main__":
    main()
