"""Relative links and #anchors of the Markdown documents, resolved as GitHub renders them."""

from __future__ import annotations

import re
from pathlib import Path

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*```")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced blocks (links in code are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a document's headings give, with GitHub's -1, -2 for repeats."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, root: Path) -> list[str]:
    """`file:line: target (why)` for each relative link or anchor that does not resolve."""
    broken: list[str] = []
    text = path.read_text(encoding="utf-8")
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        if fenced or FENCE.match(line):
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where} (no such heading in {linked.name})")
    return broken
