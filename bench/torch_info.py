"""Prints one line on the PyTorch the benchmarks compare with: its version, its BLAS (and, for OpenBLAS, the
core it runs: Debian's torch 1.13 goes through libblas.so.3, which is OpenBLAS), its CPU capability and its
default thread count. Run by the benchmarks (bench_util.h: torch_info) with $SACCADE_PYTHON."""
import ctypes

import torch

config = torch.__config__.show()
blas = "MKL" if "BLAS_INFO=mkl" in config else "libblas.so.3"
if blas != "MKL":
    try:
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        blas = f"OpenBLAS (libblas.so.3), core {lib.openblas_get_corename().decode()}"
    except (OSError, AttributeError):
        pass
capability = [line.split(":")[1].strip() for line in config.splitlines() if "CPU capability" in line]
if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability"):
    capability = [torch.backends.cpu.get_cpu_capability()]
print(f"PyTorch {torch.__version__}, BLAS {blas}, CPU capability {capability[0] if capability else '?'}, "
      f"{torch.get_num_threads()} threads by default")
