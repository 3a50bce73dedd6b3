"""Where the bundled prompts and datasets live, in a checkout and in an installed wheel.

In a checkout they sit at the repo top level (next to the package); the wheel build maps
them into the package (evalkit/prompts, evalkit/datasets). Looking in the package first
means an installed copy never reads stray files from the current directory.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from evalkit.core.errors import EvalkitError


def package_root() -> Path:
    """The evalkit package folder."""
    return Path(__file__).resolve().parents[1]


def _locate(kind: str, parts: tuple[str, ...]) -> Path:
    """`kind/parts...` in the package if it exists there, else at the repo top level."""
    bases = (package_root() / kind, package_root().parent / kind)
    for base in bases:
        candidate = base.joinpath(*parts)
        if candidate.exists():
            return candidate
    # Nothing exists: name the path under the first folder that does, for a useful error.
    for base in bases:
        if base.is_dir():
            return base.joinpath(*parts)
    return bases[-1].joinpath(*parts)


def prompt_path(*parts: str) -> Path:
    """Path of a prompt template, e.g. prompt_path("mcq", "default.txt")."""
    return _locate("prompts", parts)


def dataset_path(*parts: str) -> Path:
    """Path of a bundled dataset file or folder, e.g. dataset_path("demo", "mcq.tsv")."""
    return _locate("datasets", parts)


def read_prompt(*parts: str) -> str:
    """A prompt template's text with one trailing newline removed (files end with one by habit)."""
    path = prompt_path(*parts)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalkitError(f"prompt template not found: {path} ({exc.strerror or exc})") from exc
    return text[:-1] if text.endswith("\n") else text


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill_template(template: str, **values: str) -> str:
    """Replace {name} placeholders in one pass, so values holding braces are left alone.

    Unknown placeholders are kept verbatim (str.format would fail on a question with braces).
    """
    pieces = _pieces(template)
    return "".join(values.get(piece[1:-1], piece) if i % 2 else piece for i, piece in enumerate(pieces))


@functools.lru_cache(maxsize=256)
def _pieces(template: str) -> tuple[str, ...]:
    """The template split once into text and "{name}" placeholders, alternately (text first): filling
    every query's prompt by regex was a tenth of reading a data set."""
    pieces: list[str] = []
    at = 0
    for m in _PLACEHOLDER.finditer(template):
        pieces += (template[at:m.start()], m.group(0))
        at = m.end()
    pieces.append(template[at:])
    return tuple(pieces)
