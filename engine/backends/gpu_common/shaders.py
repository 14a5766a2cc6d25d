"""The one loader of WGSL sources in ``shaders/``, cached per specialisation.

A line ``//!include DIR/NAME.wgsl`` (a path under ``shaders/``) is replaced by that file's
text, its own includes expanded; a file is included once per shader however many files ask
for it, so helpers can name what they need. A ``prelude`` is included as if named by the
file's first line (every GPU_PIXEL shader has ``pixel/common.wgsl``). Specialisation then
fills ``${name}`` placeholders of the whole expanded text with ``string.Template.substitute``:
a placeholder without a value is an error, never silently left in the source.
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

INCLUDE = "//!include "


@functools.cache
def _source(path: str) -> str:
    return resources.files("shaders").joinpath(path).read_text(encoding="utf-8")


def _expand(path: str, seen: set[str]) -> list[str]:
    seen.add(path)
    lines = []
    for line in _source(path).splitlines():
        if line.startswith(INCLUDE):
            name = line[len(INCLUDE):].strip()
            if name not in seen:
                lines.extend(_expand(name, seen))
            continue
        lines.append(line)
    return lines


@functools.cache
def expanded(path: str, prelude: str | None = None) -> str:
    """The text of ``shaders/<path>`` with its includes expanded (not specialised)."""
    seen: set[str] = set()
    lines = _expand(prelude, seen) if prelude else []
    return "\n".join(lines + _expand(path, seen))


@functools.lru_cache(maxsize=4096)
def _render(path: str, prelude: str | None, params: tuple[tuple[str, str], ...]) -> str:
    try:
        return Template(expanded(path, prelude)).substitute(dict(params))
    except KeyError as exc:
        raise ValueError(f"shader {path} needs the parameter {exc.args[0]!r}") from exc
    except ValueError as exc:  # a '$' that starts no placeholder
        raise ValueError(f"shader {path}: {exc}") from exc


def load_shader(path: str, prelude: str | None = None, **params) -> str:
    """WGSL text of ``shaders/<path>``, includes expanded (``prelude`` first), ``${name}``
    placeholders filled from ``params``."""
    return _render(path, prelude, tuple(sorted((k, str(v)) for k, v in params.items())))
