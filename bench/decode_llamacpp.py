#!/usr/bin/env python3
"""Batch-1 decoding against llama.cpp on the same weights (issue 53, item 4: a peer benchmark).

For each model shape, a random model of the real shapes is written by transformers (seed 0; the tokenizer of
tests/data/hf_llama or hf_gpt2 beside it, its ids padded to the vocabulary as the converter pads them), then
converted to GGUF in f32, bf16 and q8_0 exactly as llama.cpp's convert_hf_to_gguf.py does
(tests/fixtures/make_gguf.py's convert, checked byte for byte against that converter). Then, alternated run by
run for `--rounds` rounds:

  llama.cpp   llama-bench -m FILE -p 32 -n TOKENS -t THREADS -r 1 -o json: its pp32 (prompt tokens/s) and
              tg (generated tokens/s) figures
  saccade     build/release/bench/decode_profile --model FILE --no-profile TOKENS THREADS: the prefill of 32
              tokens in one step, and TOKENS decoded tokens timed one by one (bf16: the bf16 file converted
              to bfloat16 after loading; q8_0: the file's Q8_0 blocks kept as they are, except GPT-2's,
              which saccade holds transposed: dequantized on loading and quantized again with llama.cpp's
              rounding, the same blocks)

Prints the machine (CPU, OpenBLAS core, load average), each pair's medians and min-max, and saccade / llama.cpp.
Not a test: speed is measured here, never asserted. llama.cpp is a peer outside the repository, like PyTorch,
never a dependency: build its llama-bench from the llama-cpp-python sdist on PyPI (vendor/llama.cpp), e.g.

  pip download --no-binary :all: --no-deps llama-cpp-python && tar xzf llama_cpp_python-*.tar.gz
  cmake -S llama_cpp_python-*/vendor/llama.cpp -B llama-build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \\
        -DLLAMA_CURL=OFF && cmake --build llama-build --target llama-bench -j2

Usage (from the repository root, a Python with torch, transformers, numpy and gguf, e.g. ../.venv-bench):
  python bench/decode_llamacpp.py --llama-bench PATH [--shapes smollm,qwen05,gpt2] [--types f32,bf16,q8_0]
         [--threads 2] [--tokens 128] [--rounds 3] [--work /tmp/saccade_llamacpp]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import make_gguf  # noqa: E402

PROFILE = os.path.join(ROOT, "build", "release", "bench", "decode_profile")

# shape -> (GGUF architecture, transformers config, the tokenizer folder in tests/data, tokenizer.ggml.pre)
SHAPES = {
    "smollm": ("llama", dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                             num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                             max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                             tie_word_embeddings=True, bos_token_id=991, eos_token_id=992),
               "hf_llama", "llama-bpe"),
    "qwen05": ("qwen2", dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                             num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                             max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                             tie_word_embeddings=True, bos_token_id=991, eos_token_id=992),
               "hf_llama", "llama-bpe"),
    "gpt2": ("gpt2", dict(model_type="gpt2", n_embd=768, n_layer=12, n_head=12, n_positions=1024,
                          vocab_size=50257, bos_token_id=0, eos_token_id=0),
             "hf_gpt2", "gpt-2"),
}
QTYPES = {"f32": make_gguf.F32, "bf16": make_gguf.BF16, "q8_0": make_gguf.Q8_0}


def make_folder(shape, work):
    """The random model of `shape` (transformers, seed 0) with a tokenizer, once."""
    arch, cfg, tok_folder, _ = SHAPES[shape]
    folder = os.path.join(work, shape)
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    import torch
    import transformers
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(**cfg)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "tests", "data", tok_folder, f), folder)
    return folder


def make_gguf_file(shape, folder, qtype_name):
    arch, _, _, pre = SHAPES[shape]
    path = os.path.join(folder, f"model-{qtype_name}.gguf")
    if not os.path.isfile(path):
        make_gguf.convert(folder, arch, QTYPES[qtype_name], pre, shape, path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


def run_llamacpp(llama_bench, path, tokens, threads):
    out = subprocess.run([llama_bench, "-m", path, "-p", "32", "-n", str(tokens), "-t", str(threads), "-r", "1",
                          "-o", "json"], check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0)
    return pp, tg, rows[0].get("build_commit", "?"), rows[0].get("cpu_info", "?")


def run_saccade(model, dtype, tokens, threads, env):
    out = subprocess.run([PROFILE, "--model", model, "--dtype", dtype, "--no-profile", str(tokens), str(threads)],
                         check=True, capture_output=True, text=True, env=env).stdout
    tg = pp = None
    for line in out.splitlines():
        if "tokens/s unprofiled" in line:
            tg = float(line.split(": ")[1].split(" tokens/s")[0])
        if "prefill 32 tokens" in line:
            pp = float(line.split("prefill 32 tokens")[1].split("(")[1].split(" tokens/s")[0])
        if line.startswith("decode_profile: OpenBLAS core"):
            header = line
    return pp, tg, header


def summary(xs):
    return f"{statistics.median(xs):8.1f} [{min(xs):.1f}-{max(xs):.1f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--shapes", default="smollm,qwen05,gpt2")
    ap.add_argument("--types", default="f32,bf16,q8_0")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/saccade_llamacpp")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ)
    print(f"load average {os.getloadavg()[0]:.2f}; OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset')}")
    rows = []
    for shape in a.shapes.split(","):
        folder = make_folder(shape, a.work)
        for qtype in a.types.split(","):
            gguf_path = make_gguf_file(shape, folder, qtype)
            ours = (gguf_path, qtype if qtype != "q8_0" or shape == "gpt2" else "f32")
            for threads in (int(t) for t in a.threads.split(",")):
                r = {"ours_pp": [], "ours_tg": [], "peer_pp": [], "peer_tg": []}
                for _ in range(a.rounds):
                    pp, tg, header = run_saccade(ours[0], ours[1], a.tokens, threads, env)
                    r["ours_pp"].append(pp)
                    r["ours_tg"].append(tg)
                    pp, tg, commit, cpu = run_llamacpp(a.llama_bench, gguf_path, a.tokens, threads)
                    r["peer_pp"].append(pp)
                    r["peer_tg"].append(tg)
                rows.append((shape, qtype, threads, r))
                print(header)
                print(f"llama.cpp build {commit}, {cpu}")
                print(f"{shape:7s} {qtype:5s} {threads} threads: decode saccade {summary(r['ours_tg'])}  "
                      f"llama.cpp {summary(r['peer_tg'])} tokens/s  ratio "
                      f"{statistics.median(r['ours_tg']) / statistics.median(r['peer_tg']):.2f}; "
                      f"prefill 32 saccade {summary(r['ours_pp'])}  llama.cpp {summary(r['peer_pp'])}  ratio "
                      f"{statistics.median(r['ours_pp']) / statistics.median(r['peer_pp']):.2f}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
