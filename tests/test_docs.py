"""README.md, bench/README.md and the pages under ``docs/``: every relative link leads to a file (and to a heading
there), and every command line the pages show parses (the README's are ``test_readme.py``'s)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(page: Path) -> str:
    """The page without its fenced blocks (a snippet's brackets are code, not links)."""
    return re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", _prose(page), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page)) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_an_existing_file_and_heading(page: Path) -> None:
    broken: list[str] = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in _anchors(file)):
            broken.append(target)
    assert broken == []


def test_the_check_finds_links_and_anchors() -> None:
    """The decision path page is linked from the README and links into its own sections."""
    assert "docs/approvals.md" in _links(ROOT / "README.md")
    page = ROOT / "docs" / "approvals.md"
    assert any(t.startswith("#") for t in _links(page))
    assert "what-happens-under-each-fault" in _anchors(page)


def test_every_command_line_a_page_shows_parses() -> None:
    """The indented ``awaken-stdio ...`` lines of the docs are what people paste, as the README's are."""
    import shlex

    from awaken_stdio.cli import build_parser

    parser = build_parser()
    lines = [
        line.strip().split("  #")[0]
        for page in PAGES[1:]
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("    awaken-stdio ")
    ]
    assert any("--done" in line for line in lines)
    for line in lines:
        parser.parse_args(shlex.split(line)[1:])  # SystemExit (a failure here) for a command the CLI does not know
