"""The kernel kinds of the dataset and the predictors: op names, op classes, dimensions (notebook 01).

Pure Python (no pandas, no torch), so that the light modules (lib.graph_ops, lib.profile_ops) can share
these names with the rest of lib instead of keeping copies.
"""
GEMM_OPS = ("bmm", "linear")
# Element-wise ops of the dataset; a 'u' suffix is the tensor-op-scalar form of the binary op.
EW_OPS = ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh")
# Op name -> op class of the per-op predictors (DESIGN.md).
OP_CLASS = {"bmm": "BMM", "linear": "FC", "softmax": "SOFTMAX", "ln": "LN", **{op: "EW" for op in EW_OPS}}
OP_CLASSES = ("BMM", "FC", "EW", "SOFTMAX", "LN")
GEMM_DIMS = ("B", "M", "N", "K")   # upstream naming: [B, M, N] @ [B, N, K] -> [B, M, K]
VEC_DIMS = ("B", "H")              # vector ops over [B, H]
FP32_BYTES = 4                     # bytes per element: every kernel of the dataset and the labels is fp32
