"""NeuSight reproduction: forecast GPU kernel and model latency from spec sheets."""
import os

# MKL, torch's CPU BLAS, picks its float32 matmul kernels by CPU, and the order in which they sum decides the weights
# every predictor trains to. MKL_CBWR=COMPATIBLE selects MKL's vendor-neutral kernels, which are meant to give the
# same bits on any x86 CPU (docs/reproducibility.md). MKL reads the variable at its first call, so it is set when lib is
# first imported, before any lib code runs a matmul; a value the user set wins (lib.numerics.blas_fingerprint shows it).
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
