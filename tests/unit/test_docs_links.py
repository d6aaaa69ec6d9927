"""Every relative link in the README and docs/ reaches a file, and its #anchor a heading
there (GitHub's slugs), so that moving a section cannot leave a reader at a dead link."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "tracecompass" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(page: Path) -> str:
    """The page without its code blocks, where brackets are code, not links."""
    lines, in_code = [], False
    for line in page.read_text().splitlines():
        if FENCE.match(line.strip()):
            in_code = not in_code
        elif not in_code:
            lines.append(line)
    return "\n".join(lines)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> Set[str]:
    seen: Set[str] = set()
    for line in prose(page).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if not match:
            continue
        base = slug(match.group(1))
        name, n = base, 0
        while name in seen:  # repeated headings get -1, -2, ...
            n += 1
            name = f"{base}-{n}"
        seen.add(name)
    return seen


def links() -> List[Tuple[Path, str]]:
    found = []
    for page in PAGES:
        for target in LINK.findall(prose(page)):
            if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                found.append((page, target))
    return found


def test_relative_links_reach_their_files_and_headings() -> None:
    checked = links()
    assert len(checked) > 20, checked  # the pattern still finds the docs' links
    broken = []
    for page, target in checked:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_slugs_follow_github() -> None:
    assert slug("`trace`'s fixed cost") == "traces-fixed-cost"
    assert slug("Payloads: full, compact and batched") == "payloads-full-compact-and-batched"
    assert slug("HPC: native work, MPI ranks, clusters") == "hpc-native-work-mpi-ranks-clusters"
