"""docs/settings.md's tables of run settings, made from `TrainConfig` itself, so each setting's meaning,
default, readers and preconditions are said once: its meaning in its field's docstring (read from the
source as Pydantic's `use_attribute_docstrings` reads them), its default and group on the field, the
algorithms that read it (`read_by`) and what it needs (`config.NEEDS`) where they are enforced.

`python -m asyncfl.settings.settings_docs [PAGE …]` rewrites every table between a
`<!-- settings: GROUP, … -->` line and the next `<!-- /settings -->`; a test fails while they differ.
The settings an algorithm's file declares (`declared_by`) are not in their group's table but in the one
marked `<!-- settings: ALGORITHMS -->` (docs/algorithm-settings.md), so the shared page stays one page
as the algorithms grow.
"""

import argparse
import ast
import dataclasses
import inspect
import itertools
import re
import sys
from functools import cache
from pathlib import Path

from asyncfl.settings.config import NEEDS, SHARED_SETTINGS, TrainConfig, shown_value
from asyncfl.settings.names import ALGORITHMS, ASYNCHRONOUS
from asyncfl.settings.rules import Group

TABLE = re.compile(r"(<!-- settings: (?P<groups>[A-Z_, ]+) -->\n).*?(?=<!-- /settings -->)", re.S)
OWN = "ALGORITHMS"  # a marker's word for the settings the algorithms' files declare
PAGES = (Path("docs/settings.md"), Path("docs/algorithm-settings.md"))  # the pages with tables


@cache
def field_docs() -> dict[str, str]:
    """Each field's docstring, the string literal right under it, as one line: the shared settings'
    in `TrainConfig`'s class body, an algorithm's own in its `Parameters`' (`declared_by`)."""
    declared_by = [item.metadata.get("declared_by") for item in dataclasses.fields(TrainConfig)]
    owners = dict.fromkeys([SHARED_SETTINGS, *(owner for owner in declared_by if owner is not None)])
    docs: dict[str, str] = {}
    for owner in owners:
        (tree,) = ast.parse(inspect.getsource(owner)).body
        assert isinstance(tree, ast.ClassDef)
        docs |= {
            field.target.id: " ".join(str(after.value.value).split())
            for field, after in itertools.pairwise(tree.body)
            if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        }  # fmt: skip
    return docs


def readers(read_by: tuple[str, ...]) -> str:
    """The algorithms that read a setting, or those that do not where they are fewer: of all, or of the
    asynchronous ones where only those read it (docs/algorithms.md lists them)."""
    if set(read_by) <= set(ASYNCHRONOUS):
        group, names = (
            "the asynchronous algorithms",
            [algorithm for algorithm in ALGORITHMS if algorithm in ASYNCHRONOUS],
        )
    else:
        group, names = "every algorithm", list(ALGORITHMS)
    others = [algorithm for algorithm in names if algorithm not in read_by]
    if not others:
        return group
    if len(others) < len(read_by):
        return f"{group} but " + ", ".join(f"`{algorithm}`" for algorithm in others)
    return ", ".join(f"`{algorithm}`" for algorithm in read_by)


def row(field: dataclasses.Field) -> str:
    default = shown_value(field.default)
    if field.name not in field_docs():
        owner = field.metadata.get("declared_by", SHARED_SETTINGS)
        raise SystemExit(
            f"{owner.__module__}.{owner.__name__}.{field.name} has no docstring under it: say what it means"
        )
    text = field_docs()[field.name]
    if field.metadata["read_by"]:
        text += f"; read by {readers(field.metadata['read_by'])}"
    if field.name in NEEDS:
        text += f"; only with {NEEDS[field.name][0]}"
    return f"| `{field.name}` [{default}] | {text} |"


def table(groups: list[Group], own: bool = False) -> str:
    """The shared settings of these groups, or (`own`) those the algorithms' files declare, in
    TrainConfig's order, as a Markdown table."""
    rows = [
        row(field)
        for field in dataclasses.fields(TrainConfig)
        if (field.metadata.get("declared_by") is not None) == own and (own or field.metadata["group"] in groups)
    ]
    return "\n".join(["| key | meaning |", "|---|---|", *rows]) + "\n"


def with_tables(text: str) -> str:
    """`text` with every marked table made anew from the fields."""

    def made(match: re.Match) -> str:
        names = [name.strip() for name in match["groups"].split(",")]
        if names == [OWN]:
            return match[1] + table([], own=True)
        return match[1] + table([Group[name] for name in names])

    return TABLE.sub(made, text)


def main(arguments: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m asyncfl.settings.settings_docs", description="Rewrite a page's tables of settings."
    )
    parser.add_argument("pages", type=Path, nargs="*", default=list(PAGES), help=f"[{' '.join(map(str, PAGES))}]")
    for page in parser.parse_args(arguments).pages:
        if not page.is_file():
            parser.error(f"{page} is not a file; give the pages whose tables to rewrite")
        page.write_text(with_tables(page.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
