#!/usr/bin/env python3
"""Batch-1 generation at real model sizes, `gpt sample --hf` against transformers' `generate` (issue 41's goal:
GPT-2 124M and a Llama of SmolLM-135M's shapes, 128 new tokens after a 32-token prompt, greedy, f32 and bf16
weights, the same threads). These machines cannot download weights: the models are random, written by
transformers in the published layout, with a byte-level BPE of the models' vocabulary size trained on the
fortunes by `tokenizers` (the speed of a forward does not depend on the weights' values).

  SACCADE_PYTHON=/work/.venv-bench/bin/python
  $SACCADE_PYTHON bench/hf_generate.py --gpt build/release/examples/gpt/gpt --threads 2 --runs 3

Each figure alternates one transformers run and one saccade run, --runs times, in fresh processes for
saccade; medians with min-max. saccade's figure is the tokens/s that `gpt sample` prints (prefill included),
transformers' the new tokens over the wall time of `generate` (prefill included). Prints the OpenBLAS core
`gpt` ran, the CPU, the load average, and the weights' read rate a token needs (bytes of weights / time per
token). Needs torch, transformers and tokenizers (PyPI; never a dependency of saccade). The folders go to
--work (default /tmp/saccade_hf_bench, ~1.6 GB).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

FORTUNES = "/usr/share/games/fortunes/fortunes"  # the default text (hf_train_step.py reads it too)
MODELS = {
    # GPT-2 124M (transformers' GPT2Config defaults)
    "gpt2-124M": lambda: GPT2LMHeadModel(GPT2Config()),
    # SmolLM-135M's shapes
    "llama-smollm-135M": lambda: LlamaForCausalLM(LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)),
}


def make_folder(name, work, fortunes=FORTUNES):
    """The model's folder (f32) and its bf16 twin, with a tokenizer of the model's vocabulary size trained on
    the text file `fortunes`."""
    out = os.path.join(work, name)
    if os.path.exists(os.path.join(out, "bf16", "config.json")):
        return out
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    vocab = model.config.vocab_size
    bpe = ByteLevelBPETokenizer()
    bpe.train([fortunes], vocab_size=vocab, min_frequency=1, special_tokens=["<|endoftext|>"])
    os.makedirs(out, exist_ok=True)
    bpe.save(os.path.join(out, "tokenizer.json"))
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(out, "tokenizer.json"))
    # pad the vocabulary to the model's with added tokens when the fortunes have fewer merges
    missing = vocab - len(tok)
    if missing > 0:
        tok.add_tokens([f"<|pad{i}|>" for i in range(missing)], special_tokens=True)
    for sub, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        model.to(dtype).save_pretrained(os.path.join(out, sub))
        tok.save_pretrained(os.path.join(out, sub))
    return out


def prompt_of(folder, n, fortunes=FORTUNES):
    """A text whose encoding is `n` tokens: the first `n` tokens of the text file `fortunes`, decoded."""
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "f32", "tokenizer.json"))
    ids = tok(open(fortunes, encoding="utf-8", errors="replace").read(20000))["input_ids"][:n]
    return tok.decode(ids), ids


def torch_rate(folder, sub, ids, new, threads, device="cpu"):
    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if sub == "bf16" else torch.float32
    cls = GPT2LMHeadModel if "gpt2" in folder else LlamaForCausalLM
    model = cls.from_pretrained(os.path.join(folder, sub), dtype=dtype).eval().to(device)
    x = torch.tensor([ids], device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        model.generate(x, max_new_tokens=4, do_sample=False, pad_token_id=0)  # warm-up
        sync()
        start = time.perf_counter()
        out = model.generate(x, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
        sync()
        seconds = time.perf_counter() - start
    return (out.shape[1] - len(ids)) / seconds


def saccade_rate(gpt, folder, sub, prompt, new, threads, env, device="cpu"):
    cmd = [gpt, "sample", "--hf", os.path.join(folder, "f32"), "--prompt", prompt, "--max-new-tokens", str(new),
           "--temperature", "0", "--threads", str(threads), "--device", device]
    if sub == "bf16":
        cmd += ["--dtype", "bf16"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    m = re.search(r"generated (\d+) tokens after a prompt of (\d+) in ([0-9.]+) s: ([0-9.]+) tokens/s", out)
    core = re.search(r"core (\w+)", out)
    return float(m.group(4)), int(m.group(2)), core.group(1) if core else "?"


def add_common_args(p):
    """The options hf_generate.py and hf_train_step.py share: the gpt binary, threads, runs, models, --work and
    --unpinned."""
    p.add_argument("--gpt", default="build/release/examples/gpt/gpt")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--work", default="/tmp/saccade_hf_bench")
    p.add_argument("--unpinned", action="store_true",
                   help="run gpt with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (it then picks the CPU's core)")


def gpt_env(a):
    """The environment gpt runs in: this one, less the OpenBLAS pin with --unpinned; LD_LIBRARY_PATH from
    SACCADE_GPT_LD_LIBRARY_PATH where set (scripts/gpu_run: gpt needs the unpacked Debian libraries, torch must
    not see them)."""
    env = dict(os.environ)
    if os.environ.get("SACCADE_GPT_LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["SACCADE_GPT_LD_LIBRARY_PATH"]
    if a.unpinned:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    return env


def cpu_model():
    return next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: both frameworks generate on the GPU (gpt sample --device cuda)")
    p.add_argument("--fortunes", default=FORTUNES, help="the text the tokenizers are trained on")
    a = p.parse_args()
    env = gpt_env(a)
    where = torch.cuda.get_device_name() if a.device == "cuda" else "the CPU"
    print(f"CPU {cpu_model()}; on {where}; torch {torch.__version__}; {a.threads} threads; "
          f"load average {os.getloadavg()}")
    for name in a.models.split(","):
        folder = make_folder(name, a.work, a.fortunes)
        prompt, ids = prompt_of(folder, a.prompt_tokens, a.fortunes)
        for sub in ("f32", "bf16"):
            ours, theirs, core, n_prompt = [], [], "?", 0
            for _ in range(a.runs):
                theirs.append(torch_rate(folder, sub, ids, a.new, a.threads, a.device))
                r, n_prompt, core = saccade_rate(a.gpt, folder, sub, prompt, a.new, a.threads, env, a.device)
                ours.append(r)
            weights = sum(os.path.getsize(os.path.join(folder, sub, f)) for f in os.listdir(os.path.join(folder, sub))
                          if f.endswith(".safetensors"))
            mo, mt = statistics.median(ours), statistics.median(theirs)
            print(f"{name} {sub}: saccade {mo:.1f} tokens/s ({min(ours):.1f}-{max(ours):.1f}; OpenBLAS core {core}; "
                  f"prompt {n_prompt} tokens), transformers {mt:.1f} ({min(theirs):.1f}-{max(theirs):.1f}): "
                  f"{mo / mt:.2f}x; weights {weights / 1e6:.0f} MB, read at {weights * mo / 1e9:.1f} GB/s by saccade")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
