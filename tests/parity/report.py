"""Where the parity sweeps write: each report is one section of a Markdown file (docs/FIDELITY.md
holds the ball's and the cars'), rewritten in place between its markers, so each sweep regenerates
its own section and leaves the rest of the file as it is."""

from __future__ import annotations

from pathlib import Path

TITLE = "# Soccar fidelity: nitro against RocketSim\n"


def write_section(path: Path, name: str, text: str) -> None:
    """Put ``text`` between ``<!-- begin NAME -->`` and ``<!-- end NAME -->`` in ``path``: in place of
    what the markers held, else appended (a new file starts with `TITLE`)."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{text.strip()}\n{end}"
    old = path.read_text() if path.exists() else TITLE
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)
