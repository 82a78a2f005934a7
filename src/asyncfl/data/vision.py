"""Import torchvision even where its compiled ops cannot load.

PyPI's torchvision 0.28.0 is a CUDA build. Next to a CPU-only torch its `_C`
extension does not load, and `import torchvision` then dies while registering fake
kernels for `torchvision::nms` and `torchvision::qnms`, ops that only `_C` defines.
asyncfl needs torchvision's datasets and download code, never those detection ops,
so when (and only when) that import fails this way we define the two op schemas
without kernels and import again. Where `_C` loads (CUDA torch on a cluster) the
first import succeeds and nothing is changed.

torchvision is imported on first use, not with asyncfl: it pulls in torch._dynamo, about a second
per process, which commands that do not read an MNIST or CIFAR file (training on digits, figures,
every Snakemake job of the quick pipeline) need not pay.
"""

import functools
import sys
from types import ModuleType

import torch

# The schemas `_C` would have defined (torchvision/csrc/ops/nms.cpp and its quantized twin).
MISSING_OP_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)

# Kept alive for the life of the process: dropping a Library removes its definitions.
placeholder_ops: torch.library.Library | None = None


@functools.cache
def import_torchvision() -> ModuleType:
    """Return the torchvision module, defining placeholder op schemas if `_C` is missing."""
    global placeholder_ops
    try:
        import torchvision
    except RuntimeError as error:
        if "torchvision::" not in str(error) or placeholder_ops is not None:
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        placeholder_ops = torch.library.Library("torchvision", "FRAGMENT")
        for schema in MISSING_OP_SCHEMAS:
            placeholder_ops.define(schema)
        import torchvision
    return torchvision
