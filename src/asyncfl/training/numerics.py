"""Process-wide numeric switches for the forward and backward passes: precision and memory layout."""

import contextlib
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Numerics:
    """Optional speed knobs; the defaults are plain IEEE fp32.

    `precision`: fp32, tf32 (CUDA matmuls and convolutions in TensorFloat-32) or bf16 (autocast:
    activations in bfloat16, parameters, optimizer state and BatchNorm statistics stay fp32).
    `channels_last`: NHWC images and weights, the layout that oneDNN and cuDNN convolve fastest.
    Every setting is deterministic; the non-default ones change the numbers, not the run-to-run identity.
    """

    precision: str = "fp32"
    channels_last: bool = False

    def apply_globally(self) -> None:
        """TF32 is a process-wide switch: off unless asked for (cuDNN convolutions default to TF32)."""
        mode = "tf32" if self.precision == "tf32" else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode  # type: ignore[attr-defined]  # torch ≥ 2.9, not in its stubs

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=torch.bfloat16)

    def layout(self, images: torch.Tensor) -> torch.Tensor:
        """A batch of images (N×C×H×W, or clients×N×C×H×W) in the chosen memory layout.

        A stacked batch is stored N, H, W, clients, C: the reshape that vmap's convolution rule
        makes into N × (clients·C) × H × W is then a view, and NHWC (channels_last) already.
        """
        if not self.channels_last:
            return images
        if images.dim() == 5:
            return images.permute(1, 3, 4, 0, 2).contiguous().permute(3, 0, 4, 1, 2)
        return images.contiguous(memory_format=torch.channels_last)

    def prepare(self, model: nn.Module) -> nn.Module:
        return model.to(memory_format=torch.channels_last) if self.channels_last else model  # type: ignore[call-overload]
