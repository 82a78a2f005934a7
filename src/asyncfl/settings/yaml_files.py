"""Reading a YAML file as a configuration: a clear one-line error for a bad file, scientific notation
read as users mean it, and no alias bomb expanded."""

from pathlib import Path
from typing import Any

import yaml

from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import read_input
from asyncfl.settings.numbers import SCIENTIFIC


def with_numbers(value: Any, done: dict[int, Any] | None = None) -> Any:
    """`value` (a loaded YAML document) with every scientific-notation string turned into a float. A
    mapping or list that YAML aliases share is converted once and stays shared, so a document of
    aliases of aliases is not expanded into a tree exponentially larger than its text."""
    done = {} if done is None else done
    if isinstance(value, dict | list) and id(value) in done:
        return done[id(value)]
    if isinstance(value, dict):
        mapping: dict[Any, Any] = {}
        done[id(value)] = mapping
        mapping.update({key: with_numbers(item, done) for key, item in value.items()})
        return mapping
    if isinstance(value, list):
        sequence: list[Any] = []
        done[id(value)] = sequence
        sequence.extend(with_numbers(item, done) for item in value)
        return sequence
    if isinstance(value, str) and SCIENTIFIC.fullmatch(value):
        return float(value)
    return value


MAX_YAML_NODES = 100_000  # values of a document once its aliases are expanded: a real config has a few hundred


def expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values `node` stands for with every alias expanded, counted without expanding them."""
    if id(node) not in sizes:
        sizes[id(node)] = 0  # a recursive alias counts once while its own size is being counted
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        total = 1
        for child in children:
            total += expanded_size(child, sizes)
            if total > MAX_YAML_NODES:
                break
        sizes[id(node)] = total
    return sizes[id(node)]


def repeated_key(node: yaml.Node, seen: set[int]) -> yaml.ScalarNode | None:
    """The second occurrence of the first key written twice in one mapping of the document, or None (a
    merge's `<<` keys, which YAML means to be overridden, aside)."""
    if id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in keys:
                    return key
                keys.add(key.value)
    children = [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) else []
    children += node.value if isinstance(node, yaml.SequenceNode) else []
    return next((found for child in children if (found := repeated_key(child, seen)) is not None), None)


def read_yaml(path: Path) -> Any:
    """A YAML file's content, or one line naming the file and what is wrong with it. The file is
    read only if it is a regular file of at most a few MiB, and a document whose aliases expand to
    more than MAX_YAML_NODES values (an alias bomb) is refused before it is built."""
    content = read_input(path)
    try:
        text = content.decode("utf-8")
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None and expanded_size(node, {}) > MAX_YAML_NODES:
            raise InputError(
                f"{path} stands for more than {MAX_YAML_NODES} values once its YAML aliases are expanded; "
                "write the settings out instead of nesting aliases"
            )
        repeated = repeated_key(node, set()) if node is not None else None
        if repeated is not None:
            raise InputError(
                f"{path}: {repeated.value[:80]!r} is given twice in one mapping (line {repeated.start_mark.line + 1}), "
                "and YAML would keep the last silently; give it once"
            )
        return with_numbers(yaml.safe_load(text))
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not UTF-8 text (byte {error.start}); save it as UTF-8") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to be a configuration") from None
    except yaml.YAMLError as error:
        raise InputError(f"cannot read {path}: {str(error).splitlines()[0]}") from None
