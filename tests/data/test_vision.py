"""asyncfl.data.vision makes torchvision importable next to a CPU-only torch, and changes nothing elsewhere."""

import subprocess
import sys

import pytest
import torch

PROBE = """
import asyncfl.data.vision as vision
found = vision.import_torchvision()
import torchvision, torchvision.datasets
assert found is torchvision
print(torchvision.extension._has_ops(), vision.placeholder_ops is not None)
"""


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.subprocess
def test_import_is_safe_and_only_patches_when_ops_are_missing():
    result = run_python(PROBE)
    assert result.returncode == 0, result.stderr
    has_ops, patched = result.stdout.split()
    # Where the compiled ops load (CUDA torch on a cluster) nothing is defined by us.
    assert patched == str(has_ops == "False")


@pytest.mark.subprocess
def test_plain_import_fails_only_because_of_the_missing_ops():
    """Documents the problem the module solves: without it the import dies on torchvision::nms."""
    result = run_python("import torchvision; print(torchvision.extension._has_ops())")
    if result.returncode == 0:
        assert result.stdout.strip() == "True"
    else:
        assert "torchvision::nms" in result.stderr
        assert torch.version.cuda is None


def test_datasets_and_transforms_work_after_import():
    from asyncfl.data.vision import import_torchvision

    torchvision = import_torchvision()

    image = torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4)
    flipped = torchvision.transforms.functional.hflip(image)
    assert torch.equal(flipped, image.flip(-1))
    assert torchvision.datasets.MNIST.resources
