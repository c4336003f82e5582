#!/usr/bin/python3
"""The PyTorch twin of bench/caption_step.cpp: one training step of the sat captioner of
examples/image_caption (same layers and sizes, float32): Conv2d(1->16, 3x3)-maxpool 2-relu,
Conv2d(16->32, 3x3)-maxpool 4-relu (a 7x7 grid), Linear(32->128)-relu plus a fixed 2-d sinusoidal
encoding; GRU decoder (embedding 64, hidden 128) with additive attention (W_k projected once per caption,
attention hidden 128) over the 49 grid vectors, output Linear(128 + 128 -> 19); batch 64, 18 decoder
steps; cross-entropy ignoring <pad>, backward, clip_grad_norm_(1), Adam.

  /usr/bin/python3 bench/caption_step_torch.py threads samples [cuda]
prints `median_ms X`, `min_ms Y`, `max_ms Z` over `samples` timed steps after one warm-up step (with `cuda`:
the model and the batch on the GPU, two warm-up steps, each step ended by torch.cuda.synchronize()).
"""
import math
import statistics
import sys
import time

import torch
from torch import nn

B, STEPS, V, D, E, H, A = 64, 18, 19, 128, 64, 128, 128


def positional_2d(d, rows, cols):
    """Half the channels encode the row, half the column (sin/cos pairs), as nn::PositionalEncoding2D."""
    half = d // 2
    pe = torch.zeros(rows, cols, d)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, half, 2).float() / half)
    r = torch.arange(rows).float()[:, None] * freq
    c = torch.arange(cols).float()[:, None] * freq
    pe[:, :, 0:half:2] = torch.sin(r)[:, None, :]
    pe[:, :, 1:half:2] = torch.cos(r)[:, None, :]
    pe[:, :, half::2] = torch.sin(c)[None, :, :]
    pe[:, :, half + 1::2] = torch.cos(c)[None, :, :]
    return pe.reshape(rows * cols, d)


class Sat(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.proj = nn.Linear(32, D)
        self.register_buffer("pos", positional_2d(D, 7, 7))
        self.embedding = nn.Embedding(V, E)
        self.init_h = nn.Linear(D, H)
        self.W_q = nn.Linear(H, A, bias=False)
        self.W_k = nn.Linear(D, A, bias=False)
        self.w_v = nn.Linear(A, 1, bias=False)
        self.rnn = nn.GRUCell(E + D, H)
        self.output = nn.Linear(H + D, V)

    def encode(self, images):
        x = torch.relu(torch.max_pool2d(self.conv1(images), 2))
        x = torch.relu(torch.max_pool2d(self.conv2(x), 4))  # (B, 32, 7, 7)
        x = x.flatten(2).transpose(1, 2)  # (B, 49, 32)
        return torch.relu(self.proj(x)) + self.pos

    def decode(self, memory, tokens):
        keys = self.W_k(memory)  # (B, L, A), once for all steps
        embedded = self.embedding(tokens)
        h = torch.tanh(self.init_h(memory.mean(1)))
        outputs = []
        for t in range(tokens.shape[1]):
            scores = self.w_v(torch.tanh(keys + self.W_q(h)[:, None, :])).squeeze(2)  # (B, L)
            alpha = torch.softmax(scores, 1)
            context = torch.bmm(alpha[:, None, :], memory).squeeze(1)  # (B, D)
            h = self.rnn(torch.cat([embedded[:, t], context], 1), h)
            outputs.append(torch.cat([h, context], 1))
        return self.output(torch.stack(outputs, 1))


def main():
    threads, samples = int(sys.argv[1]), int(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Sat().to(device)
    adam = torch.optim.Adam(model.parameters(), lr=3e-3)
    images = torch.rand(B, 1, 56, 56).to(device)
    tokens = torch.randint(0, V, (B, STEPS + 1)).to(device)
    inputs, target = tokens[:, :STEPS], tokens[:, 1:].reshape(-1)

    def step():
        logits = model.decode(model.encode(images), inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), target, ignore_index=0)
        adam.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        adam.step()

    for _ in range(2 if device == "cuda" else 1):  # warm-up
        step()
    sync()
    ms = []
    for _ in range(samples):
        t0 = time.perf_counter()
        step()
        sync()
        ms.append(1e3 * (time.perf_counter() - t0))
    print(f"median_ms {statistics.median(ms):.1f}")
    print(f"min_ms {min(ms):.1f}")
    print(f"max_ms {max(ms):.1f}")


if __name__ == "__main__":
    main()
