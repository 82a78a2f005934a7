"""The documentation holds together: every `README "Section"` or `docs/PAGE.md "Section"` reference in
the repository names a heading that exists, and every relative link in the docs names a file that exists."""

import re
from pathlib import Path

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", REPO / "config/README.md", *sorted((REPO / "docs").glob("*.md"))]
SOURCES = [
    *PAGES,
    *(REPO / "src/asyncfl").rglob("*.py"),
    *(REPO / "workflow").rglob("*.smk"),
    *(REPO / "workflow/report").glob("*.rst"),
    REPO / "workflow/Snakefile",
    *(REPO / "config").glob("*.yaml"),
    *(REPO / ".test/config").glob("*.yaml"),
    *(REPO / "peers").glob("*.py"),
]
REFERENCE = re.compile(r'\b((?:docs/|config/)?[\w-]+\.md|README) "([^"\n]+)"')
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def headings(page: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in page.read_text().splitlines() if re.match(r"#{1,4} ", line)}


def target_of(source: Path, name: str) -> Path:
    if name == "README":
        return REPO / "README.md"
    if name.startswith(("docs/", "config/")) or source.parent != REPO / "docs":
        return REPO / name
    return source.parent / name


def references() -> list[tuple[Path, str, str]]:
    found = []
    for source in SOURCES:
        for match in REFERENCE.finditer(source.read_text()):
            found.append((source, match.group(1), match.group(2)))
    return found


def test_there_are_references_to_check():
    assert len(references()) > 40 and len(PAGES) >= 9


@pytest.mark.parametrize("source,page,section", references(), ids=lambda value: str(value).split("/")[-1][:40])
def test_every_section_reference_names_a_heading(source, page, section):
    target = target_of(source, page)
    assert target.is_file(), f"{source}: {page} does not exist"
    assert section in headings(target), f'{source}: {page} has no section "{section}"'


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_names_a_file(page):
    for link in LINK.findall(page.read_text()):
        if "://" in link:
            continue
        assert (page.parent / link).exists(), f"{page}: link to {link}, which does not exist"


REPOSITORY_PATH = re.compile(r"`((?:tests|src|workflow|config|peers|docs)/[\w./-]+\.(?:py|smk|yaml|md|sh))`")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_file_a_page_names_in_code_exists(page):
    """A file named as `tests/…/test_x.py` (say, as the test that shows a claim) still exists."""
    missing = [path for path in REPOSITORY_PATH.findall(page.read_text()) if not (REPO / path).exists()]
    assert not missing, f"{page.name} names {missing}, which do not exist"
