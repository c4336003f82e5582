#!/usr/bin/env python3
"""A mixture-of-experts training step, saccade against transformers' OlmoeForCausalLM (issue 51's MoE goal).

Both sides train a decoder of OLMoE-1B-7B's per-token shapes (d 2048, 16 heads, full-width q and k RMSNorms,
experts of width 1024, top-k weights not renormalised, vocabulary 50304), scaled down to --layers blocks and
--experts experts with --top-k a token (defaults 2, 16, 2; the issue's "16 experts, top-2"), random weights,
on batches of 4 rows of 256 random ids: the mean cross-entropy of every next token plus the router's
load-balancing loss (router_aux_loss_coef 0.01, output_router_logits=True), backward, AdamW (lr 3e-4, no
weight decay) on every parameter. One sample is a whole step. saccade: bench/moe_step, float32 ("f32") or
under AutocastGuard(bfloat16) ("bf16"). transformers (PyPI; never a dependency of saccade): OlmoeForCausalLM
with sdpa attention and each experts implementation given (--impls: "eager", the issue's reference, a loop
over the experts hit; "grouped_mm", transformers 5's default, torch._grouped_mm), in float32 or under
torch.autocast("cpu", torch.bfloat16). Each configuration alternates one process of each side, --runs times;
a process's figure is its median step after the first two.

  SACCADE_PYTHON=/work/.venv-bench/bin/python
  $SACCADE_PYTHON bench/moe_step.py --bench build/release/bench/moe_step --steps 6 --runs 2

With --model qwen2.5-0.5b (issue 51's dense step goal), both sides train Qwen2.5-0.5B's shapes instead (d 896,
14 heads, 2 key/value heads, intermediate 4864, vocabulary 151936, q/k/v biases, tied embeddings; --layers
of its 24): transformers' Qwen2ForCausalLM with sdpa attention (--impls is not read), the cross-entropy alone.
With --peak-gflops (bench/matmul_bf16's figure at these threads) the table gives each side's model FLOP
utilisation: 3 times the forward FLOPs saccade's profiler counts a token (forward and backward), over it.

  $SACCADE_PYTHON bench/moe_step.py --model qwen2.5-0.5b --layers 24 --dtypes bf16 --steps 4 --runs 2
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_peft import parse, step_lines  # noqa: E402  (the workers' lines, read the same way)

BATCH, CONTEXT = 4, 256


def torch_worker(a, impl, dtype):
    import resource

    import torch
    import transformers
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.model == "qwen2.5-0.5b":
        config = transformers.Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                                          num_hidden_layers=a.layers, num_attention_heads=14,
                                          num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
                                          rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False)
        model = transformers.Qwen2ForCausalLM._from_config(config, attn_implementation="sdpa")
    else:
        config = transformers.OlmoeConfig(vocab_size=50304, hidden_size=2048, intermediate_size=1024,
                                          num_hidden_layers=a.layers, num_attention_heads=16,
                                          num_key_value_heads=16, max_position_embeddings=4096,
                                          rms_norm_eps=1e-5,
                                          num_experts=a.experts, num_experts_per_tok=a.top_k,
                                          norm_topk_prob=False, output_router_logits=True,
                                          router_aux_loss_coef=0.01, tie_word_embeddings=False)
        model = transformers.OlmoeForCausalLM._from_config(config, attn_implementation="sdpa",
                                                           experts_implementation=impl)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    g = torch.Generator().manual_seed(3)
    vocab = config.vocab_size
    times, loss, aux = [], None, None
    for _ in range(a.steps):
        ids = torch.randint(0, vocab, (BATCH, CONTEXT + 1), generator=g)
        x, y = ids[:, :-1], ids[:, 1:]
        t0 = time.perf_counter()
        with torch.autocast("cpu", torch.bfloat16, enabled=dtype == "bf16"):
            out = model(input_ids=x)
            lm = torch.nn.functional.cross_entropy(out.logits.float().reshape(-1, vocab), y.reshape(-1))
            aux = out.aux_loss * config.router_aux_loss_coef if a.model == "olmoe" else torch.zeros(())
            loss = lm + aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(1e3 * (time.perf_counter() - t0))
    print(f"framework torch-{impl}-{dtype}\n{step_lines(times, BATCH * CONTEXT)}"
          f"peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}\n"
          f"last_loss {lm.item():.4f}\naux_loss {aux.item():.5f}\n"
          f"versions torch {torch.__version__} transformers {transformers.__version__}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/release/bench/moe_step")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--impls", default="eager,grouped_mm")
    ap.add_argument("--model", default="olmoe", choices=["olmoe", "qwen2.5-0.5b"])
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--worker", default="")
    a = ap.parse_args()
    if a.worker:
        impl, dtype = a.worker.split(":")
        torch_worker(a, impl, dtype)
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    shape = ["--layers", str(a.layers), "--steps", str(a.steps), "--threads", str(a.threads), "--experts",
             str(a.experts), "--top-k", str(a.top_k), "--model", a.model]
    if a.model != "olmoe":
        a.impls = "sdpa"  # one transformers form: the dense model has no experts implementation
    results = {}
    for run in range(a.runs):
        jobs = []
        for dtype in a.dtypes.split(","):
            jobs.append((f"saccade {dtype}", [a.bench, str(a.layers), str(a.steps), str(a.threads), dtype,
                                               str(a.experts), str(a.top_k), a.model]))
            for impl in a.impls.split(","):
                jobs.append((f"torch {impl} {dtype}",
                             [sys.executable, __file__, "--worker", f"{impl}:{dtype}"] + shape))
        if run % 2:
            jobs.reverse()
        for name, cmd in jobs:
            r = parse(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)
            results.setdefault(name, []).append(r)
            print(f"run {run} {name}: {r['step_ms']} ms a step ({r['step_ms_min']}-{r['step_ms_max']}), "
                  f"loss {r['last_loss']} + {r['aux_loss']}, peak RSS {r['peak_rss_mib']} MiB", flush=True)
    info = next(rs[0] for k, rs in results.items() if k.startswith("saccade"))
    versions = next(rs[0]["versions"] for k, rs in results.items() if k.startswith("torch"))
    shape = (f"{a.experts} experts, top-{a.top_k}" if a.model == "olmoe"
             else f"{info['parameters']} parameters")
    print(f"\nOpenBLAS core {info['core']}, CPU {info['cpu']}, {a.threads} threads, {a.model}, "
          f"{a.layers} layers, {shape}, load {os.getloadavg()[0]:.2f}; {versions}")
    print(f"experts' forward FLOPs a token {info['expert_mflops_per_token']} M of "
          f"{info['forward_mflops_per_token']} M (saccade's profiler)")
    train_flops = 3e6 * float(info["forward_mflops_per_token"]) * BATCH * CONTEXT  # a step's, fwd + bwd
    print(f"{'form':26s} {'ms a step, median (min-max of runs)':36s} {'tokens/s':>9s} {'peak RSS MiB':>13s} "
          f"{'saccade is x faster':>20s} {'MFU':>6s}")
    for name, rs in results.items():
        ms = [float(r["step_ms"]) for r in rs]
        dtype = name.split()[-1]
        ours = statistics.median(float(r["step_ms"]) for r in results[f"saccade {dtype}"])
        rss = max(float(r["peak_rss_mib"]) for r in rs)
        print(f"{name:26s} {statistics.median(ms):10.1f} ({min(ms):.1f}-{max(ms):.1f}){'':14s} "
              f"{BATCH * CONTEXT * 1e3 / statistics.median(ms):9.1f} {rss:13.1f} "
              f"{statistics.median(ms) / ours:20.2f} "
              f"{train_flops / (statistics.median(ms) / 1e3) / 1e9 / a.peak_gflops if a.peak_gflops else 0:6.2f}")


if __name__ == "__main__":
    main()
