"""scikit-learn's 8×8 digits with a fixed stratified split, prepared once into ROOT/digits.npz (numpy only:
`asyncfl partition` reads their labels without torch; data/loading.py makes the `Dataset`)."""

import hashlib
import io
from pathlib import Path

import numpy as np

from asyncfl.files import write_npz

DIGITS_TEST_FRACTION = 0.2
# `asyncfl data --dataset digits` keeps the digits and their fixed split in ROOT/digits.npz, so that
# the pipeline's jobs need not import scikit-learn (about 1.7 s per process). The file is read only
# when its SHA-256 is this one, what scikit-learn's bundled data and the split give (as torchvision's
# MD5s vouch for MNIST); any other file is passed over and scikit-learn is asked again.
DIGITS_FILE = "digits.npz"
DIGITS_FILE_SHA256 = "504cc6b3911317d98e034085b6304274404ea17da31f27634c07a1fbc3fbaeab"


def digits_from_sklearn() -> dict[str, np.ndarray]:
    """scikit-learn's bundled 8×8 digits and a fixed stratified train/test split (sorted indices)."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    bunch = sklearn_digits()
    train_idx, test_idx = train_test_split(
        np.arange(len(bunch.target)), test_size=DIGITS_TEST_FRACTION, stratify=bunch.target, random_state=0
    )
    return {
        "images": bunch.images.astype(np.uint8),
        "labels": bunch.target.astype(np.int64),
        "train": np.sort(train_idx).astype(np.int64),
        "test": np.sort(test_idx).astype(np.int64),
    }


def read_prepared_digits(path: Path) -> dict[str, np.ndarray] | None:
    """The prepared digits at `path`, or None where there is no file or not the expected one."""
    if not path.is_file():
        return None
    content = path.read_bytes()  # read once: hashed, then parsed
    if hashlib.sha256(content).hexdigest() != DIGITS_FILE_SHA256:
        return None
    with np.load(io.BytesIO(content), allow_pickle=False) as npz:
        return {key: npz[key] for key in ("images", "labels", "train", "test")}


def digits_arrays(prepared: Path, download: bool = False) -> dict[str, np.ndarray]:
    """The digits from the prepared file when it is the expected one, else from scikit-learn (which
    `asyncfl data`, the pipeline's `download`, then writes to the prepared file)."""
    arrays = read_prepared_digits(prepared)
    if arrays is None:
        arrays = digits_from_sklearn()
        if download:
            write_npz(prepared, arrays)
    return arrays
