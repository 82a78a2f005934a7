"""Numbers as users write them, read one way by every reader (client classes, YAML's scientific notation,
command-line flags): decimals, exponents (`1e-6`), a leading sign, spaces around. `inf`, `nan` and
Python's `1_000` are not numbers here: each reader refuses them with its key named."""

import math
import re

UNSIGNED = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"  # 2, 0.5, .5, 3., 1e-6, 1E+3
NUMBER = re.compile(rf"\s*[-+]?{UNSIGNED}\s*")
# Scientific notation as users write it (1e-3, 5E4): YAML 1.1, which PyYAML follows, reads it as text
# unless it has a dot and a signed exponent (YAML 1.2 reads it as a float); other numbers YAML reads itself
SCIENTIFIC = re.compile(r"[-+]?(?:\.\d+|\d+(?:\.\d*)?)[eE][-+]?\d+")


def parse_number(text: str) -> float | None:
    """The number `text` holds, or None where it holds none (nor inf or nan)."""
    return float(text) if NUMBER.fullmatch(text) else None


def finite(value: float) -> bool:
    """Neither NaN nor ±inf. A Python int always is: one of 400 digits, which JSON and YAML read as
    written, overflows `math.isfinite`'s float instead of answering."""
    return isinstance(value, int) or math.isfinite(value)
