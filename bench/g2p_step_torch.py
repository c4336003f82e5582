#!/usr/bin/python3
"""The PyTorch twin of bench/g2p_step.cpp: one training step of the g2p `bahdanau` model of examples/g2p
(same layers and sizes, float32): letter Embedding(29, 64), bidirectional GRU(64, 256) over packed sequences
(valid lengths), s_0 = tanh(Linear(512 -> 256)([h_fwd; h_bwd])), phone Embedding(42, 64), a GRUCell(512 + 64,
256) decoder whose input is [context; x_t], additive attention (W_q 256 -> 256, W_k 512 -> 256 projected
once per batch, w_v 256 -> 1, masked softmax over valid letters), output Linear(256 + 512 -> 42) over
[s_t; c_t]; dropout 0.1 on the embeddings, the attention weights and before the output layer; batch 128,
12 letters, 12 phones; cross-entropy ignoring <pad>, backward, clip_grad_norm_(1), Adam.

  python3 bench/g2p_step_torch.py threads samples
prints `median_ms X`, `min_ms Y`, `max_ms Z` over `samples` timed steps after one warm-up step.
"""
import statistics
import sys
import time

import torch
from torch import nn

B, S, T, V, E, H = 128, 12, 12, 42, 64, 256


class Bahdanau(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embedding = nn.Embedding(29, E)
        self.encoder = nn.GRU(E, H, batch_first=True, bidirectional=True)
        self.init_state = nn.Linear(2 * H, H)
        self.tgt_embedding = nn.Embedding(V, E)
        self.W_q = nn.Linear(H, H, bias=False)
        self.W_k = nn.Linear(2 * H, H, bias=False)
        self.w_v = nn.Linear(H, 1, bias=False)
        self.rnn = nn.GRUCell(2 * H + E, H)
        self.output = nn.Linear(3 * H, V)
        self.drop = nn.Dropout(0.1)

    def forward(self, letters, lens, phones_in):
        x = self.drop(self.src_embedding(letters))
        packed = nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        out, h_n = self.encoder(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, 2H)
        h = torch.tanh(self.init_state(torch.cat([h_n[0], h_n[1]], 1)))
        keys = self.W_k(memory)  # (B, S, H)
        masked = torch.arange(S)[None, :] >= lens[:, None]  # (B, S)
        embedded = self.drop(self.tgt_embedding(phones_in))
        outs = []
        for t in range(phones_in.shape[1]):
            scores = self.w_v(torch.tanh(self.W_q(h)[:, None, :] + keys)).squeeze(-1)  # (B, S)
            weights = self.drop(torch.softmax(scores.masked_fill(masked, float("-inf")), -1))
            context = torch.bmm(weights[:, None, :], memory).squeeze(1)  # (B, 2H)
            h = self.rnn(torch.cat([context, embedded[:, t]], 1), h)
            outs.append(torch.cat([h, context], 1))
        return self.output(self.drop(torch.stack(outs, 1)))


def main():
    threads, samples = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Bahdanau()
    adam = torch.optim.Adam(model.parameters(), lr=2e-3)
    lens = torch.randint(S // 2, S + 1, (B,))
    letters = torch.randint(1, 29, (B, S))
    phones_in = torch.randint(3, V, (B, T))
    target = torch.randint(3, V, (B * T,))

    def step():
        logits = model(letters, lens, phones_in)
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), target, ignore_index=0)
        adam.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        adam.step()

    step()  # warm-up
    ms = []
    for _ in range(samples):
        t0 = time.perf_counter()
        step()
        ms.append(1e3 * (time.perf_counter() - t0))
    print(f"median_ms {statistics.median(ms):.3f}\nmin_ms {min(ms):.3f}\nmax_ms {max(ms):.3f}")


if __name__ == "__main__":
    main()
