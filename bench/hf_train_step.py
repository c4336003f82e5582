#!/usr/bin/env python3
"""One training step at real model sizes, `gpt train --init-from-hf` against transformers (issue 41's goal:
GPT-2 124M and a Llama of SmolLM-135M's shapes, batch 4 x 256 tokens, AdamW, float32 and bf16 autocast, the
same threads). The models are hf_generate.py's random folders (same --work), fine-tuned on the fortunes:
saccade's windows are cropped to 256 (`--context 256`, nanoGPT's crop_block_size), transformers' model keeps
its table and reads 256 positions (the same FLOPs but for the position table's gradient).

  SACCADE_PYTHON=/work/.venv-bench/bin/python
  $SACCADE_PYTHON bench/hf_train_step.py --gpt build/release/examples/gpt/gpt --threads 2 --runs 3 --steps 8

Each figure alternates one transformers process and one saccade process, --runs times. A process trains
--steps steps; its figure is the median step time of the steps after the first two (saccade's from its log.csv,
the steps' training seconds; transformers' timed around forward, backward, clipping and AdamW), in tokens/s,
and its peak RSS (ru_maxrss of the process: loading, tokenising and the steps; saccade's process is ended
once its log.csv holds the steps, before its final scoring of the whole validation stream). transformers: GPT2LMHeadModel /
LlamaForCausalLM from the f32 folder, torch.optim.AdamW(lr 3e-4, weight decay 0.1, fused=False), gradient
norm clipped to 1, float32 or under torch.autocast("cpu", torch.bfloat16). saccade: `--dtype bf16` is its
autocast (float32 weights and AdamW). With --peak-gflops (bench/matmul's bf16 figure at these threads) it
prints the model FLOP utilisation: (6 N + 12 L d T) FLOPs per token (nanoGPT's estimate_mfu, N the parameters
without the position table) over that peak. Needs torch and transformers (PyPI; never a dependency of
saccade).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_generate import (FORTUNES, MODELS, add_common_args, cpu_model, gpt_env,  # noqa: E402  (the same folders)
                         make_folder)

BATCH, CONTEXT = 4, 256


def torch_worker(folder, dtype, steps, threads):
    """Runs in its own process (its peak RSS is its own): prints one line per step time."""
    import torch
    from transformers import GPT2LMHeadModel, LlamaForCausalLM, PreTrainedTokenizerFast
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cls = GPT2LMHeadModel if "gpt2" in folder else LlamaForCausalLM
    model = cls.from_pretrained(os.path.join(folder, "f32"), dtype=torch.float32).train()
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "f32", "tokenizer.json"))
    ids = torch.tensor(tok(open(FORTUNES, encoding="utf-8", errors="replace").read(400000))["input_ids"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, fused=False)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - CONTEXT - 1, (BATCH,), generator=g)
        x = torch.stack([ids[s:s + CONTEXT] for s in starts])
        start = time.perf_counter()
        with torch.autocast("cpu", torch.bfloat16, enabled=dtype == "bf16"):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {time.perf_counter() - start:.6f}", flush=True)


def run(cmd, env=None, done=None):
    """Runs cmd; returns its stdout and its own peak RSS in bytes (os.wait4's rusage of that child alone).
    With `done` (a function), the process is ended as soon as done() is true."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        ended = False
        while done and proc.poll() is None:
            if done():
                proc.terminate()
                ended = True
                break
            time.sleep(0.2)
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and not ended:
            raise SystemExit(f"{' '.join(cmd)}: exit {code}")
        out.seek(0)
        return out.read(), usage.ru_maxrss * 1024


def run_torch(folder, dtype, steps, threads):
    out, rss = run([sys.executable, __file__, "--torch-worker", folder, "--dtype", dtype, "--steps", str(steps),
                    "--threads", str(threads)])
    times = [float(l.split()[1]) for l in out.splitlines() if l.startswith("step ")]
    return statistics.median(times[2:]), rss


def run_saccade(gpt, folder, dtype, steps, threads, env):
    with tempfile.TemporaryDirectory() as out:
        cmd = [gpt, "train", "--init-from-hf", os.path.join(folder, "f32"), "--context", str(CONTEXT),
               "--batch-size", str(BATCH), "--steps", str(steps), "--eval-every", "0", "--eval-tokens", "256",
               "--sample-tokens", "0", "--lr", "3e-4", "--threads", str(threads), "--out", os.path.join(out, "run")]
        if dtype == "bf16":
            cmd += ["--dtype", "bf16"]
        log = os.path.join(out, "run", "log.csv")
        # ended once the steps are logged: the final scoring of the whole validation stream is not part of a
        # step
        text, rss = run(cmd, env, lambda: os.path.exists(log) and sum(1 for _ in open(log)) > steps)
        with open(log) as f:
            seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    times = [b - a for a, b in zip([0.0] + seconds, seconds)]
    core = next((l.split("core ")[1].split()[0] for l in text.splitlines() if "core " in l and "BLAS" in l), "?")
    return statistics.median(times[2:]), rss, core


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--peak-gflops", type=float, default=0, help="the bf16 GEMM peak (bench/matmul) for the MFU")
    p.add_argument("--torch-worker", help=argparse.SUPPRESS)
    p.add_argument("--dtype", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.torch_worker:
        return torch_worker(a.torch_worker, a.dtype, a.steps, a.threads)
    import torch
    env = gpt_env(a)
    print(f"CPU {cpu_model()}; torch {torch.__version__}; {a.threads} threads; batch {BATCH} x {CONTEXT}; "
          f"load average {os.getloadavg()}")
    for name in a.models.split(","):
        folder = make_folder(name, a.work)
        model = MODELS[name]()
        c = model.config
        n = sum(p.numel() for n_, p in model.named_parameters() if "wpe" not in n_)
        flops_per_token = 6 * n + 12 * c.num_hidden_layers * c.hidden_size * CONTEXT
        del model
        for dtype in a.dtypes.split(","):
            ours, theirs, rss_ours, rss_theirs, core = [], [], [], [], "?"
            for _ in range(a.runs):
                t, r = run_torch(folder, dtype, a.steps, a.threads)
                theirs.append(BATCH * CONTEXT / t)
                rss_theirs.append(r)
                t, r, core = run_saccade(a.gpt, folder, dtype, a.steps, a.threads, env)
                ours.append(BATCH * CONTEXT / t)
                rss_ours.append(r)
            mo, mt = statistics.median(ours), statistics.median(theirs)
            mfu = (f"; MFU {mo * flops_per_token / (a.peak_gflops * 1e9):.0%} of {a.peak_gflops:.0f} GFLOP/s"
                   if a.peak_gflops > 0 else "")
            print(f"{name} {dtype}: saccade {mo:.0f} tokens/s ({min(ours):.0f}-{max(ours):.0f}; OpenBLAS core {core}), "
                  f"transformers {mt:.0f} ({min(theirs):.0f}-{max(theirs):.0f}): {mo / mt:.2f}x{mfu}; peak RSS "
                  f"saccade {min(rss_ours) / 2**30:.2f} GiB, transformers {min(rss_theirs) / 2**30:.2f} GiB")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
