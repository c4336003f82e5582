#!/usr/bin/python3
"""The PyTorch twin of bench/gpt_step.cpp: the default GPT of examples/gpt (GPT-2's architecture: token and
learned position embeddings, 4 pre-LayerNorm blocks of causal 4-head self-attention with separate q, k, v, o
Linear layers (biases) and a GELU MLP (4x), final LayerNorm, output tied to the token embedding; d_model 128,
context 128, vocabulary 256, float32, dropout 0.1 while training), with saccade's parameter names, so
`{k: v for k, v in safetensors.torch.load_file(path).items() if not k.startswith("optimizer.")}` of a gpt
checkpoint loads into GPT() with load_state_dict(strict=True).

  python3 bench/gpt_step_torch.py train threads samples batch [f32|bf16]
      one training step: forward, cross-entropy, backward, clip_grad_norm_(1), AdamW (weight decay on the
      block matrices only); prints `median_ms`, `min_ms`, `max_ms` over `samples` steps after one warm-up.
      bf16: the forward and the loss under torch.autocast("cpu", torch.bfloat16) (float32 master weights and
      optimizer, as saccade's AutocastGuard), torch 2.x
  python3 bench/gpt_step_torch.py train-cuda samples batch f32|bf16 eager|compile
      the same step with the model and the batch on cuda:0, each step ended by torch.cuda.synchronize(), after
      five warm-up steps (compile: torch.compile(model), its compilation inside the warm-up); bf16 runs under
      torch.autocast("cuda", torch.bfloat16); TF32 matmuls stay off (PyTorch's default), as in saccade
  python3 bench/gpt_step_torch.py generate threads samples new_tokens
      greedy decoding of `new_tokens` tokens after a 1-token prompt, batch 1, eval mode, no_grad, with a
      past_key_values-style cache (per block: keys and values (1, H, t, d) grown by torch.cat); prints
      `median_tokens_per_s`, `min_tokens_per_s`, `max_tokens_per_s`
Attention: F.scaled_dot_product_attention where torch has it (2.x; is_causal for training), else the composed
softmax(q k^T / sqrt(d) + causal mask) v (torch 1.13).
"""
import math
import statistics
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F

V, T, L, H, D = 256, 128, 4, 4, 128
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def attend(q, k, v, causal, p, training):
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p if training else 0.0, is_causal=causal)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        tq, tk = q.shape[-2], k.shape[-2]
        mask = torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq)
        s = s.masked_fill(~mask, float("-inf"))
    return F.dropout(torch.softmax(s, -1), p, training) @ v


class Attention(nn.Module):  # saccade's nn::MultiHeadAttention: W_q, W_k, W_v, W_o with biases
    def __init__(self):
        super().__init__()
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(D, D) for _ in range(4))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)


class Block(nn.Module):  # nn::GPTBlock, with its state_dict names
    def __init__(self, p):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(D), Attention(), nn.LayerNorm(D), MLP()
        self.p = p

    def forward(self, x, cache=None):
        B, Tn, _ = x.shape
        a, at = self.ln_1(x), self.attn
        split = lambda t: t.view(B, Tn, H, D // H).transpose(1, 2)
        q, k, v = split(at.W_q(a)), split(at.W_k(a)), split(at.W_v(a))
        if cache is not None:
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        y = attend(q, k, v, Tn > 1, self.p, self.training).transpose(1, 2).reshape(B, Tn, D)
        x = x + F.dropout(at.W_o(y), self.p, self.training)
        return x + F.dropout(self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)))), self.p, self.training)


class GPT(nn.Module):
    """examples/gpt's GPT with its state_dict names: a checkpoint's model tensors load strictly (the output
    layer is wte.weight itself, so there is no lm_head.weight to tie)."""

    def __init__(self, p=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.h = nn.ModuleList(Block(p) for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.p = p
        for name, w in self.named_parameters():
            if w.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("W_o.weight", "c_proj.weight")) else 0.02
                nn.init.normal_(w, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(w)

    def forward(self, idx, start=0, caches=None):
        pos = torch.arange(start, start + idx.shape[1], device=idx.device)
        x = F.dropout(self.wte(idx) + self.wpe(pos), self.p, self.training)
        for i, b in enumerate(self.h):
            x = b(x, None if caches is None else caches[i])
        return self.ln_f(x) @ self.wte.weight.t()


def train(threads, samples, batch, dtype="f32", device="cpu", mode="eager"):
    model = GPT().to(device)
    decay = [p for n, p in model.named_parameters() if n.startswith("h.") and p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if not (n.startswith("h.") and p.dim() == 2)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    x = torch.randint(0, V, (batch, T), device=device)
    y = torch.randint(0, V, (batch * T,), device=device)
    forward = torch.compile(model) if mode == "compile" else model
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step():
        with torch.autocast(device, torch.bfloat16, enabled=dtype == "bf16"):
            loss = F.cross_entropy(forward(x).reshape(-1, V), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()

    for _ in range(5 if device == "cuda" else 1):
        step()
    ms = []
    for _ in range(samples):
        t0 = time.perf_counter()
        step()
        ms.append(1e3 * (time.perf_counter() - t0))
    print(f"median_ms {statistics.median(ms):.2f}\nmin_ms {min(ms):.2f}\nmax_ms {max(ms):.2f}")


@torch.no_grad()
def generate(threads, samples, new_tokens):
    model = GPT().eval()

    def run():
        caches = [[] for _ in range(L)]
        idx = torch.zeros(1, 1, dtype=torch.long)
        t = 0
        for _ in range(new_tokens):
            logits = model(idx, t, caches)
            t += idx.shape[1]
            idx = logits[:, -1].argmax(-1, keepdim=True)

    run()
    rates = []
    for _ in range(samples):
        t0 = time.perf_counter()
        run()
        rates.append(new_tokens / (time.perf_counter() - t0))
    print(f"median_tokens_per_s {statistics.median(rates):.1f}\nmin_tokens_per_s {min(rates):.1f}\n"
          f"max_tokens_per_s {max(rates):.1f}")


def main():
    torch.manual_seed(0)
    if sys.argv[1] == "train-cuda":
        train(1, int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], "cuda", sys.argv[5])
        return
    mode, threads, samples, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    if mode == "train":
        train(threads, samples, n, sys.argv[5] if len(sys.argv) > 5 else "f32")
    else:
        generate(threads, samples, n)


if __name__ == "__main__":
    main()
