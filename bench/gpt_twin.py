#!/usr/bin/python3
"""The PyTorch twin of `gpt train` (examples/gpt) for the quality-at-equal-time comparison of issue 22: the same
data, split and streams (docs/data.md, "Fortunes": checked against its SHA-256 values), the same model (the GPT of
bench/gpt_step_torch.py: examples/gpt's default sizes, byte tokens, saccade's parameter names), the same
training windows (std::mt19937_64 of --seed, reimplemented below, one draw per window, start = draw % (N - T)),
the same initial weights when --init names the init.safetensors `gpt train` wrote (else torch's own draw of
GPT-2's init), AdamW (betas 0.9 / 0.99, eps 1e-8, weight decay 0.1 on the block matrices only), the same
learning-rate schedule (scheduled_lr: warmup over steps, then cosine decay over the steps or, with
--time-limit, over training seconds), gradient clipping at norm 1, the same scoring (the first --eval-tokens
validation tokens in windows of the context, 16 windows at a time; the best model on the whole validation
stream at the end) and the same CSV log as OUT/log.csv (step,seconds,lr,train_loss,val_bits_per_byte).
The clock counts training only (scoring and logging excluded), as in `gpt train`.

  SACCADE_PYTHON=/work/.venv-bench/bin/python
  $SACCADE_PYTHON bench/gpt_twin.py --threads 2 --time-limit 600 --steps 100000 --eval-every 100 \\
      --init out/gpt_time/init.safetensors --log out/gpt_twin/log.csv

Needs torch (and safetensors for --init); never a dependency of saccade.
"""
import argparse
import copy
import hashlib
import math
import os
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_step_torch  # noqa: E402  (the model, shared with bench/gpt_step and examples/gpt/torch_check.py)

MASK64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64 (C++11 [rand.predef]: 64-bit Mersenne Twister, n 312, m 156, r 31), seeded as
    std::mt19937_64(seed); __call__ returns the next 64-bit output. The 10000th output of the default seed
    (5489) is 9981545732273789042, as the standard requires (checked in main)."""

    def __init__(self, seed):
        self.mt = [seed & MASK64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64)
        self.i = 312

    def _twist(self):
        mt, upper, lower = self.mt, MASK64 ^ 0x7FFFFFFF, 0x7FFFFFFF
        for k in range(312):
            y = (mt[k] & upper) | (mt[(k + 1) % 312] & lower)
            mt[k] = mt[(k + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
        self.i = 0

    def __call__(self):
        if self.i >= 312:
            self._twist()
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


def split_bucket(doc, seed=0):
    """docs/data.md's split hash: FNV-1a 64 over "<seed>:" + the document's bytes, splitmix64's finaliser, % 100."""
    h = 0xCBF29CE484222325
    for byte in f"{seed}:".encode() + doc:
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & MASK64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & MASK64
    return (h ^ (h >> 31)) % 100


def fortunes(folder):
    """The train and validation byte streams of docs/data.md (examples/gpt/data.cpp's make_fortunes_corpus)."""
    names = sorted(n for n in os.listdir(folder.encode())
                   if b"." not in n and os.path.isfile(os.path.join(folder.encode(), n))
                   and not os.path.islink(os.path.join(folder.encode(), n)))
    seen, train, valid = set(), [], []
    for name in names:
        with open(os.path.join(folder.encode(), name), "rb") as f:
            lines = f.read().split(b"\n")
        pieces, cur = [], []
        for line in lines:  # lines that are exactly "%" cut the pieces
            if line == b"%":
                pieces.append(b"\n".join(cur))
                cur = []
            else:
                cur.append(line)
        pieces.append(b"\n".join(cur))
        for piece in pieces:
            doc = piece.strip(b"\n")
            if not doc.strip() or doc in seen:
                continue
            seen.add(doc)
            (train if split_bucket(doc) < 90 else valid).append(doc + b"\n%\n")
    return b"".join(train), b"".join(valid)


def scheduled_lr(a, step, seconds=0.0, warmup_end=0.0):
    """examples/gpt/training.h's scheduled_lr: linear warmup from lr / 10 over W = min(warmup, steps - 1) steps,
    then cosine decay to min_lr over the remaining steps, or with a time limit over the training seconds from
    the first cosine step (warmup_end) to the limit."""
    W, epoch = min(a.warmup, a.steps - 1), step - 1
    if epoch < W:
        return a.lr * (0.1 + 0.9 * epoch / W)
    if a.time_limit > 0:
        q = (seconds - warmup_end) / max(a.time_limit - warmup_end, 1e-9)
    else:
        q = (epoch - W) / max(a.steps - W, 1)
    q = min(max(q, 0.0), 1.0)
    return a.min_lr + (a.lr - a.min_lr) * (1 + math.cos(math.pi * q)) / 2


@torch.no_grad()
def evaluate(model, tokens, max_tokens=-1, batch=16):
    """training.cpp's evaluate_lm for bytes: (nats per token, bits per byte, tokens) over the first max_tokens
    predicted tokens, in consecutive windows of the context, windows of one length batched together."""
    T = gpt_step_torch.T
    limit = len(tokens) - 1 if max_tokens < 0 else min(max_tokens, len(tokens) - 1)
    starts = list(range(0, limit, T))
    was_training = model.training
    model.eval()
    nats, count, i = 0.0, 0, 0
    while i < len(starts):
        length = min(T, limit - starts[i])
        j = i
        while j < len(starts) and j - i < batch and min(T, limit - starts[j]) == length:
            j += 1
        x = torch.stack([tokens[s:s + length] for s in starts[i:j]])
        y = torch.stack([tokens[s + 1:s + 1 + length] for s in starts[i:j]])
        logits = model(x)
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
        count += y.numel()
        i = j
    model.train(was_training)
    return nats / count, nats / math.log(2) / count, count


def write_log(path, rows):
    """OUT/log.csv's format (training.h's write_train_log), atomically (path.tmp renamed)."""
    with open(path + ".tmp", "w") as f:
        f.write("step,seconds,lr,train_loss,val_bits_per_byte\n")
        for step, seconds, lr, loss, val in rows:
            f.write(f"{step},{seconds:.3f},{lr:.6g},{loss:.6f}," + ("" if val is None else f"{val:.6f}") + "\n")
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--time-limit", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument("--min-lr", type=float, default=4e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-tokens", type=int, default=65536)
    p.add_argument("--seed", type=int, default=0, help="of the training windows (and torch's init)")
    p.add_argument("--init", help="start from these weights (gpt train's OUT/init.safetensors)")
    p.add_argument("--log", default="gpt_twin_log.csv", help="the CSV log to write")
    p.add_argument("--print-every", type=int, default=50)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    check = MT19937_64(5489)
    for _ in range(9999):
        check()
    assert check() == 9981545732273789042, "MT19937_64 is not std::mt19937_64"
    train_bytes, valid_bytes = fortunes(a.data)
    sha_t, sha_v = hashlib.sha256(train_bytes).hexdigest(), hashlib.sha256(valid_bytes).hexdigest()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; fortunes: train {len(train_bytes)} bytes "
          f"(SHA-256 {sha_t[:16]}…), validation {len(valid_bytes)} bytes ({sha_v[:16]}…)")
    if not (sha_t.startswith("e93876d4ad62d6b0") and sha_v.startswith("f1a4752f6edcb6a3")):
        sys.exit("gpt_twin: the streams differ from docs/data.md's check values")
    train = torch.frombuffer(bytearray(train_bytes), dtype=torch.uint8).long()
    valid = torch.frombuffer(bytearray(valid_bytes), dtype=torch.uint8).long()

    model = gpt_step_torch.GPT(0.0)
    if a.init:
        from safetensors.torch import load_file
        state = {k: v for k, v in load_file(a.init).items() if not k.startswith("optimizer.")}
        model.load_state_dict(state, strict=True)
    named = list(model.named_parameters())
    decay = [w for n, w in named if n.startswith("h.") and w.dim() == 2]
    rest = [w for n, w in named if not (n.startswith("h.") and w.dim() == 2)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
    print(f"gpt twin: {gpt_step_torch.L} layers, {gpt_step_torch.H} heads, d_model {gpt_step_torch.D}, context "
          f"{gpt_step_torch.T}, vocab {gpt_step_torch.V}, dropout 0, "
          f"{sum(w.numel() for w in model.parameters())} parameters, init {a.init or 'torch'}", flush=True)

    T, B = gpt_step_torch.T, a.batch_size
    rng, span = MT19937_64(a.seed), len(train) - T
    offsets = torch.arange(T + 1)
    rows, best, best_state = [], math.inf, None
    trained, warmup_end, step, ema = 0.0, 0.0, 0, 0.0
    wall0 = time.perf_counter()
    model.train()
    while step < a.steps:
        step += 1
        t0 = time.perf_counter()
        if step == min(a.warmup, a.steps - 1) + 1:
            warmup_end = trained
        lr = scheduled_lr(a, step, trained, warmup_end)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.tensor([rng() % span for _ in range(B)])
        w = train[starts[:, None] + offsets]  # (B, T + 1)
        loss = F.cross_entropy(model(w[:, :-1]).reshape(B * T, -1), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        loss_value = loss.item()
        trained += time.perf_counter() - t0
        out_of_time = a.time_limit > 0 and trained >= a.time_limit
        ema = loss_value if step == 1 else 0.95 * ema + 0.05 * loss_value
        rows.append([step, trained, lr, loss_value, None])
        if step % a.print_every == 0:
            print(f"step {step} loss {ema:.4f} {step * B * T / trained:.0f} tokens/s {trained:.0f} s", flush=True)
        if (a.eval_every > 0 and step % a.eval_every == 0) or step == a.steps or out_of_time:
            nats, bpb, n = evaluate(model, valid, a.eval_tokens)
            rows[-1][4] = bpb
            print(f"step {step}: validation {nats:.4f} nats/token, {bpb:.4f} bits/byte ({n} tokens)", flush=True)
            if bpb < best:
                best, best_state = bpb, copy.deepcopy(model.state_dict())
            write_log(a.log, rows)
        if out_of_time:
            break
    wall = time.perf_counter() - wall0
    print(f"trained {step} steps in {trained:.1f} s ({wall:.1f} s with scoring and saving; "
          f"{step / trained:.2f} steps/s, {step * B * T / trained:.0f} tokens/s), final training loss "
          f"{sum(r[3] for r in rows[-50:]) / len(rows[-50:]):.4f} nats/token")
    model.load_state_dict(best_state)
    nats, bpb, n = evaluate(model, valid)
    print(f"best model on the whole validation stream: {nats:.4f} nats/token, {bpb:.4f} bits/byte ({n} tokens)")


if __name__ == "__main__":
    main()
