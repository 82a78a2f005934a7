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


LOG = REPO / "docs/log.md"
# An ISO date (2026-11-28), or a day and month in words ("28 November", "Nov 28"): a page's measurement dated
# outside the log. A quoted source's year alone ("Wang et al. 2024") is not a date.
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATE = re.compile(rf"\b20\d\d-\d\d-\d\d\b|\b\d{{1,2}} (?:{MONTHS})\b|\b(?:{MONTHS}) \d{{1,2}}\b")


# A committed figure's record line under it ("*Made 2026-12-03 at commit 1a2b3c4 from …"): when and from what
# it was made, which the figure itself cannot say
FIGURE_RECORD = re.compile(r"^\*Made 20\d\d-\d\d-\d\d at commit [0-9a-f]{7,40} ")


@pytest.mark.parametrize("page", [page for page in PAGES if page != LOG], ids=lambda page: page.name)
def test_a_page_says_what_is_true_now_and_leaves_dates_to_the_log(page):
    lines = [line for line in page.read_text().splitlines() if not FIGURE_RECORD.match(line)]
    dated = [line.strip()[:80] for line in lines if DATE.search(line)]
    assert not dated, f"{page.name} dates {dated}: move the dated passage to docs/log.md, keep what is true now"


def test_the_log_is_newest_first_and_every_entry_dated():
    entries = re.findall(r"^## (\S+)", LOG.read_text(), flags=re.MULTILINE)
    days = [entry for entry in entries if re.fullmatch(r"20\d\d-\d\d-\d\d", entry)]
    assert len(entries) > 5 and days == entries, f"undated log entries: {set(entries) - set(days)}"
    assert days == sorted(days, reverse=True), "docs/log.md lists its entries newest first"


README_WORDS, PAGE_WORDS = 1000, 4000


@pytest.mark.parametrize("page", [page for page in PAGES if page != LOG], ids=lambda page: page.name)
def test_a_page_answers_one_question_in_at_most_4000_words_and_the_readme_in_1000(page):
    """The front page fits a few screens; a page that grows past its limit is split (the log, a record of
    every change of answer, grows by design)."""
    words = len(page.read_text().split())
    limit = README_WORDS if page.name == "README.md" and page.parent == REPO else PAGE_WORDS
    assert words <= limit, f"{page.relative_to(REPO)}: {words} words, over {limit}; split it or move history to the log"
