#!/usr/bin/python3
"""gen-transport-pages.py - the Protocol section of each transport's page,
from the code.

docs/reference/transport-{tcp,shm,ib}.md each end their protocol
description in a "## Protocol" section with one "### `path`" subsection per
source file of the transport. Each subsection is that file's narrative
comment (the comment that opens the file), so that the protocol is written
once, next to the code that implements it, and the page cannot drift from
it: the comment's " * " margins are removed and its opening "name.c - " is
dropped, the rest is kept as written (paragraphs, lists, indented blocks).
Which files a page shows, and in which order, is the page's own list of
subsections; everything else on the page (the introduction, the
measurements, the variables) is left as it is.

  gen-transport-pages.py           rewrite the sections that differ
  gen-transport-pages.py --check   exit 1, naming them, when any differs
                                   (the transport_pages test)
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["docs/reference/transport-tcp.md", "docs/reference/transport-shm.md",
         "docs/reference/transport-ib.md"]
SUBSECTION = re.compile(r"^### `([^`]+)`\n", re.M)


def narrative(path):
    """The opening comment of the file at path, as Markdown text."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        src = f.read()
    m = re.match(r"\s*/\*(.*?)\*/", src, re.S)
    if not m:
        raise SystemExit("gen-transport-pages: %s opens with no comment" % path)
    lines = []
    for line in m.group(1).split("\n"):
        line = re.sub(r"^\s*\*( |$)", "", line, count=1)
        lines.append(line.rstrip())
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    first = re.sub(r"^" + re.escape(os.path.basename(path)) + r" - ", "", lines[0])
    lines[0] = first[:1].upper() + first[1:]
    return "\n".join(fence_blocks(lines)) + "\n"


LIST_ITEM = re.compile(r"^(- |\* |\d+\. )")


def fence_blocks(lines):
    """Indented blocks of a comment (byte layouts, formulas, commands) as
    ```text blocks, dedented by their least indent, with a blank line either
    side; an indented line that continues a list item stays as it is."""
    out, i, in_list = [], 0, False
    while i < len(lines):
        line = lines[i]
        if not line:
            in_list = False
            out.append(line)
            i += 1
            continue
        if LIST_ITEM.match(line):
            in_list = True
        indented = line.startswith("  ")
        if not indented or in_list:
            out.append(line)
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith("  "):
            j += 1
        block = lines[i:j]
        cut = min(len(b) - len(b.lstrip(" ")) for b in block)
        if out and out[-1]:
            out.append("")
        out.append("```text")
        out.extend(b[cut:] for b in block)
        out.append("```")
        if j < len(lines) and lines[j]:
            out.append("")
        i = j
    return out


def render(text):
    """The page text with every subsection of its Protocol section
    replaced by its file's narrative; the list of files is the page's."""
    start = text.find("\n## Protocol\n")
    if start < 0:
        return text
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    section = text[start:end]
    parts = SUBSECTION.split(section)
    out = [parts[0]]
    for i in range(1, len(parts), 2):
        out.append("### `%s`\n\n%s\n" % (parts[i], narrative(parts[i])))
    new = "".join(out)
    # The section ends with one blank line before the next "## ".
    new = new.rstrip("\n") + "\n"
    return text[:start] + new + text[end:]


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__.split("\n\n")[-1].rstrip(), file=sys.stderr)
        return 2
    differ = []
    for page in PAGES:
        path = os.path.join(ROOT, page)
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = render(old)
        if new == old:
            continue
        differ.append(page)
        if not check:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(new)
            os.replace(path + ".tmp", path)
            print("wrote %s" % page)
    if check and differ:
        for page in differ:
            print("%s: its Protocol section is not the narrative comments of its files; "
                  "run scripts/gen-transport-pages.py" % page, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
