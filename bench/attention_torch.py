#!/usr/bin/python3
"""The PyTorch side of bench/attention.cpp: causal multi-head self-attention forward + backward with
torch.nn.MultiheadAttention(batch_first=True), need_weights=False, a causal bool attn_mask, float32.

  /usr/bin/python3 bench/attention_torch.py --serve          one request a line on stdin, one answer a line:
      ping                     -> 1
      run B T D H threads      -> ms of one forward+backward (the module is built once per shape)
      sdpa B T D H threads     -> ms of one forward+backward of bare
                                  torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                                  q, k, v (B, H, T, D/H); -1 where torch has none (1.13)
      gqa B T H H_KV D DTYPE threads -> ms of one forward+backward of grouped-query attention,
                                  scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                                  q (B, H, T, D), k, v (B, H_KV, T, D), DTYPE f32 or bf16 (tensors of that
                                  dtype: torch's CPU flash kernel takes both), backward from a fixed random
                                  output gradient; -1 where torch has no enable_gqa (before 2.5)
  /usr/bin/python3 bench/attention_torch.py --peak B T D H   prints `peak_mib X`: the VmHWM increment of one
                                                             forward+backward in this fresh process
  python3 bench/attention_torch.py --peak-gqa B T H H_KV D DTYPE threads   the same for one `gqa` case, after
                                                             one at T = 64 (torch's first-call setup not counted)
  python3 bench/attention_torch.py --gqa-check B T H H_KV D DIR   reads q, k, v (float32) and the output
      gradient g from DIR/{q,k,v,g}.bin (raw float32, written by `attention --gqa-check`), runs the `gqa` case's
      forward + backward in float32 and writes out, dq, dk, dv as DIR/{out,dq,dk,dv}_torch.bin (float32)
  python3 bench/attention_torch.py --serve-cuda              the GPU twin of bench/attention --device cuda:
      torch.nn.functional.scaled_dot_product_attention forward + backward on CUDA, q, k, v (8, 8, T, 64),
      float32, scale 1/sqrt(64), a fixed random output gradient; one request a line, one answer a line:
      ping                      -> 1
      version                   -> torch's version and the GPU's name
      run BACKEND T CAUSAL      -> warm-up and calibration of one shape; ms of one call, -1 when BACKEND
                                   refuses it (BACKEND: default, flash, efficient, cudnn, math; CAUSAL 0 or 1)
      time BACKEND T CAUSAL     -> ms per call over ~0.2 s of calls, synchronised before and after
      which T CAUSAL            -> the backend torch's default choice ran (read from the CUDA kernels'
                                   names with torch.profiler) and the name of its main kernel
      gemm N DTYPE              -> ms per call of torch.matmul of two (N, N) DTYPE matrices (~0.2 s of calls)
    Each request may end with DTYPE H D MODE [H_KV] (the 16-bit and grouped-query tables): DTYPE float32,
    bfloat16 or float16, q (8, H, T, D), k and v (8, H_KV, T, D) (H_KV below H: enable_gqa=True; default H),
    MODE fb (forward + backward) or f (the forward alone, under torch.no_grad()); without them float32, H 8,
    D 64, fb.
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


class SdpaCase:
    def __init__(self, B, T, D, H):
        torch.manual_seed(0)
        self.qkv = [torch.randn(B, H, T, D // H, requires_grad=True) for _ in range(3)]

    def run(self):
        out = torch.nn.functional.scaled_dot_product_attention(*self.qkv, is_causal=True)
        out.sum().backward()
        for t in self.qkv:
            t.grad = None


class GqaCase:
    """Causal grouped-query attention: q (B, H, T, D), k, v (B, H_kv, T, D), output gradient g (B, H, T, D)."""

    def __init__(self, q, k, v, g):
        self.q, self.k, self.v = (t.requires_grad_() for t in (q, k, v))
        self.g = g

    @staticmethod
    def random(B, T, H, H_kv, D, dtype):
        """Random normal tensors of `dtype` ("f32" or "bf16")."""
        torch.manual_seed(0)
        dt = torch.bfloat16 if dtype == "bf16" else torch.float32
        return GqaCase(*(torch.randn(B, h, T, D).to(dt) for h in (H, H_kv, H_kv, H)))

    def forward(self):
        return torch.nn.functional.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True,
                                                                enable_gqa=self.q.size(1) != self.k.size(1))

    def run(self):
        self.forward().backward(self.g)
        self.q.grad = self.k.grad = self.v.grad = None


def has_gqa():
    """Whether this torch's scaled_dot_product_attention takes enable_gqa (2.5 and later)."""
    try:
        x = torch.zeros(1, 2, 1, 1)
        torch.nn.functional.scaled_dot_product_attention(x, x[:, :1], x[:, :1], enable_gqa=True)
        return True
    except (AttributeError, TypeError, RuntimeError):
        return False


def make_attention_case(words):
    """The case a request names (None where this torch lacks the op)."""
    if words[0] == "gqa":
        if not has_gqa():
            return None
        return GqaCase.random(*map(int, words[1:6]), words[6])
    if words[0] == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return None
    return (SdpaCase if words[0] == "sdpa" else Case)(*map(int, words[1:5]))


def serve(make_case=None):
    """Answers the --serve requests of stdin (see the file comment) until its end. make_case(words) builds the
    case a request line names (None where this torch lacks the op); default: this file's cases. A request's
    last word is the thread count; the case is kept while the same words come again."""
    make_case = make_case or make_attention_case
    cases = {}
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "ping":
            print(1, flush=True)
            continue
        torch.set_num_threads(int(words[-1]))
        key = tuple(words[:-1])
        if key not in cases:
            if len(cases) > 1:
                cases.clear()
            cases[key] = make_case(words)
        if cases[key] is None:
            print(-1, flush=True)
            continue
        t0 = time.perf_counter()
        cases[key].run()
        print(f"{1e3 * (time.perf_counter() - t0):.3f}", flush=True)


def peak(case, threads=1, warm_up=None):
    """Prints the VmHWM increment of one case.run() in this fresh process, after warm_up.run() when given (a
    small case of the same op: what torch sets up on an op's first call is then not counted)."""
    torch.set_num_threads(threads)
    if warm_up is not None:
        warm_up.run()
    before = vm_hwm_kib()
    case.run()
    print(f"peak_mib {(vm_hwm_kib() - before) / 1024:.1f}")


def gqa_check(folder, B, T, H, H_kv, D):
    """The `gqa` case on the float32 inputs of `attention --gqa-check`, in float32 as the benchmark runs it;
    writes the output and the gradients as float32."""
    import numpy as np

    def load(name, heads):
        return torch.from_numpy(np.fromfile(f"{folder}/{name}.bin", dtype="<f4").reshape(B, heads, T, D))

    case = GqaCase(load("q", H), load("k", H_kv), load("v", H_kv), load("g", H))
    out = case.forward()
    out.backward(case.g)
    for name, t in (("out", out), ("dq", case.q.grad), ("dk", case.k.grad), ("dv", case.v.grad)):
        t.detach().float().numpy().tofile(f"{folder}/{name}_torch.bin")


class CudaCase:
    """One shape on the GPU; `reps` calls per timed sample, set by run()."""

    def __init__(self, T, causal, dtype="float32", H=8, D=64, mode="fb", H_kv=None):
        g = torch.Generator(device="cuda").manual_seed(0)
        dt = getattr(torch, dtype)
        make = lambda heads: torch.randn(8, heads, T, D, device="cuda", generator=g).to(dt)  # noqa: E731
        H_kv = H_kv or H
        self.q, self.k, self.v = (make(h).requires_grad_() for h in (H, H_kv, H_kv))
        self.gout = make(H)
        self.causal = causal
        self.gqa = {"enable_gqa": True} if H_kv != H else {}  # grouped-query attention (torch 2.5 and later)
        self.forward_only = mode == "f"
        self.reps = 1

    def once(self):
        if self.forward_only:
            with torch.no_grad():
                torch.nn.functional.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal,
                                                                 **self.gqa)
            return
        out = torch.nn.functional.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal,
                                                               **self.gqa)
        out.backward(self.gout)
        self.q.grad = self.k.grad = self.v.grad = None

    def timed(self, reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            self.once()
        torch.cuda.synchronize()
        return 1e3 * (time.perf_counter() - t0) / reps


def sdpa_context(backend):
    """The context that forces `backend` (a no-op context for "default")."""
    import contextlib

    if backend == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    names = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
    return sdpa_kernel([names[backend]])


def which_backend(case):
    """The backend of torch's default choice, from the names of the CUDA kernels one forward ran."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.nn.functional.scaled_dot_product_attention(case.q, case.k, case.v, is_causal=case.causal, **case.gqa)
        torch.cuda.synchronize()
    kernels = [e.key for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    for backend, marks in (("flash", ("flash",)), ("efficient", ("fmha", "efficient", "mem_eff")),
                           ("cudnn", ("cudnn",))):
        for k in kernels:
            if any(m in k.lower() for m in marks):
                return f"{backend} ({k[:60]})"
    return "math (" + ", ".join(k[:30] for k in kernels[:3]) + ")"


def gemm_ms(n, dtype):
    """ms per call of torch.matmul on two (n, n) CUDA matrices of `dtype`, over ~0.2 s of calls."""
    dt = getattr(torch, dtype)
    a, b = (torch.randn(n, n, device="cuda").to(dt) for _ in range(2))
    torch.matmul(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.matmul(a, b)
    torch.cuda.synchronize()
    reps = max(1, int(0.2 / max(time.perf_counter() - t0, 1e-6)))
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0) / reps


def serve_cuda():
    cases = {}
    for line in sys.stdin:
        words = line.split()
        try:
            if not words:
                continue
            if words[0] == "ping":
                print(1 if torch.cuda.is_available() else 0, flush=True)
                continue
            if words[0] == "version":
                print(f"{torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
                continue
            if words[0] == "gemm":
                print(f"{gemm_ms(int(words[1]), words[2]):.4f}", flush=True)
                continue
            if words[0] == "which":
                T, causal, rest = int(words[1]), words[2] == "1", words[3:]
            else:
                backend, T, causal, rest = words[1], int(words[2]), words[3] == "1", words[4:]
            dtype, H, D, mode = (rest[0], int(rest[1]), int(rest[2]), rest[3]) if rest else ("float32", 8, 64, "fb")
            H_kv = int(rest[4]) if len(rest) > 4 else H  # grouped-query attention: fewer key/value heads
            key = (T, causal, dtype, H, D, mode, H_kv)
            if key not in cases:
                cases.clear()
                torch.cuda.empty_cache()
                cases[key] = CudaCase(T, causal, dtype, H, D, mode, H_kv)
            case = cases[key]
            if words[0] == "which":
                print(which_backend(case), flush=True)
                continue
            with sdpa_context(backend):
                if words[0] == "run":
                    case.timed(1)  # warm-up
                    ms = case.timed(1)
                    case.reps = max(1, int(200 / max(ms, 1e-3)))
                    print(f"{ms:.4f}", flush=True)
                else:
                    print(f"{case.timed(case.reps):.4f}", flush=True)
        except Exception as e:  # noqa: BLE001 (a refused shape, out of memory, an older torch without the API)
            sys.stderr.write(f"attention_torch.py: {line.strip()}: {e}\n")
            torch.cuda.empty_cache()
            print(-1, flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve()
    elif len(sys.argv) > 1 and sys.argv[1] == "--serve-cuda":
        serve_cuda()
    elif len(sys.argv) == 6 and sys.argv[1] == "--peak":
        peak(Case(*map(int, sys.argv[2:6])))
    elif len(sys.argv) == 9 and sys.argv[1] == "--peak-gqa":
        B, T, H, H_kv, D = map(int, sys.argv[2:7])
        peak(GqaCase.random(B, T, H, H_kv, D, sys.argv[7]), int(sys.argv[8]),
             GqaCase.random(1, 64, H, H_kv, D, sys.argv[7]))
    elif len(sys.argv) == 8 and sys.argv[1] == "--gqa-check":
        gqa_check(sys.argv[7], *map(int, sys.argv[2:7]))
    else:
        sys.exit(__doc__)
