"""Client classes written in one setting (`speed_classes`, `link_classes`; config/README.md "The
clients' world"): `SHARE:VALUE` or `SHARE:LOW-HIGH` items separated by commas, e.g. AFL-Lib's three
edge devices `1:1,1:1.81,1:11.6` (compute time relative to the first) or its links `1:150-600,1:20-100`
(Mbit/s, uniform within the range). Shares are relative weights; a run's C clients are split among the
classes in proportion, by largest remainder (ties to the earlier class), and which client is in which
class is drawn from the class's own random stream. Under `class_draw: probability` each client's class is
drawn on its own instead, the shares its probabilities, from the same stream.
"""

import math
import re
from dataclasses import dataclass

import numpy as np

from asyncfl.settings.errors import InputError
from asyncfl.settings.numbers import UNSIGNED

MAX_CLASSES = 32
MAX_VALUE = 1e9
# Numbers as users write them (`settings/numbers.py`: 2, +2, .5, 1e-6, the documented bandwidth floor); no
# minus sign, so that a range's `-` is the one outside an exponent
NUMBER = rf"\+?{UNSIGNED}"
ITEM = re.compile(rf"\s*(?P<share>{NUMBER})\s*:\s*(?P<low>{NUMBER})\s*(?:-\s*(?P<high>{NUMBER})\s*)?")


@dataclass(frozen=True)
class ClientClass:
    share: float
    low: float
    high: float  # equal to `low` for a single value


def parse_classes(text: str, key: str, source: str = "config") -> tuple[ClientClass, ...]:
    """The classes of a setting's text; one line naming the first bad item otherwise."""
    items = [item.strip() for item in text.split(",")]
    if not 1 <= len(items) <= MAX_CLASSES:
        raise InputError(f"{source}: {key} has {len(items)} classes; give 1 to {MAX_CLASSES} as SHARE:VALUE,…")
    classes = []
    for item in items:
        found = ITEM.fullmatch(item)
        if found is None:
            raise InputError(
                f"{source}: {key} item {item!r} is not SHARE:VALUE or SHARE:LOW-HIGH (positive numbers, "
                "such as 1:20-100 or 1:1e-6; no inf or nan)"
            )
        parsed = ClientClass(float(found["share"]), float(found["low"]), float(found["high"] or found["low"]))
        numbers = (parsed.share, parsed.low, parsed.high)
        if not all(math.isfinite(n) and 0 < n <= MAX_VALUE for n in numbers) or parsed.low > parsed.high:
            raise InputError(
                f"{source}: {key} item {item!r}: share and values must be finite, > 0 and ≤ {MAX_VALUE:g}, low ≤ high"
            )
        classes.append(parsed)
    return tuple(classes)


def class_counts(shares: list[float], clients: int) -> list[int]:
    """Clients per class in proportion to `shares`: the floors, then one more to the largest remainders."""
    total = sum(shares)
    exact = [share * clients / total for share in shares]
    counts = [math.floor(round(value, 9)) for value in exact]
    by_remainder = sorted(range(len(shares)), key=lambda index: (-(exact[index] - counts[index]), index))
    for index in by_remainder[: clients - sum(counts)]:
        counts[index] += 1
    return counts


def class_of_each_client(
    classes: tuple[ClientClass, ...], rng: np.random.Generator, clients: int, by_probability: bool = False
) -> np.ndarray:
    """Per client, the index of its class: the counts of `class_counts`, shuffled by `rng`; or each
    client's drawn on its own, the shares its probabilities (`by_probability`)."""
    shares = np.array([c.share for c in classes])
    if by_probability:
        return rng.choice(len(classes), size=clients, p=shares / shares.sum())
    return rng.permutation(np.repeat(np.arange(len(classes)), class_counts(list(shares), clients)))


@dataclass(frozen=True)
class ClassRanges:
    """Per client, its class's range and the value drawn within it once (`value`)."""

    low: np.ndarray
    high: np.ndarray
    value: np.ndarray


def class_ranges(text: str, key: str, rng: np.random.Generator, clients: int, by_probability: bool) -> ClassRanges:
    """Per client, its class's range and a value drawn uniformly within it (its class's value where the
    class gives one): the classes of `text` (setting `key`), their members and the draws all from `rng`."""
    classes = parse_classes(text, key)
    members = class_of_each_client(classes, rng, clients, by_probability)
    low, high = (np.array([getattr(c, end) for c in classes])[members] for end in ("low", "high"))
    return ClassRanges(low, high, rng.uniform(low, high))


def drawn_per_client(text: str, key: str, rng: np.random.Generator, clients: int, by_probability: bool) -> np.ndarray:
    """Per client, the value `class_ranges` draws once."""
    return class_ranges(text, key, rng, clients, by_probability).value
