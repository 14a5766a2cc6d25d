"""The one loader of WGSL sources in ``shaders/``, cached per specialisation.

A line ``//!include DIR/NAME.wgsl`` (a path under ``shaders/``) is replaced by that file's
text, its own includes expanded; a file is included once per shader however many files ask
for it, so helpers can name what they need. The path may hold ``${name}`` placeholders,
filled from the parameters before the file is read: that is how a kernel picks a variant
(``//!include compute/matmul_a_${A_LOAD}.wgsl``) by name, with the code itself in a file. A
``prelude`` is included as if named by the file's first line (every GPU_PIXEL shader has
``pixel/common.wgsl``). Specialisation then fills ``${name}`` placeholders of the whole
expanded text with ``string.Template.substitute``: a placeholder without a value, in an
include line or in the code, is an error, never silently left in the source.
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

INCLUDE = "//!include "

Params = tuple[tuple[str, str], ...]


@functools.cache
def _source(path: str) -> str:
    return resources.files("shaders").joinpath(path).read_text(encoding="utf-8")


def _include_name(line: str, params: dict[str, str], shader: str) -> str:
    name = line[len(INCLUDE):].strip()
    if "$" not in name:
        return name
    try:
        return Template(name).substitute(params)
    except KeyError as exc:
        raise ValueError(f"shader {shader} needs the parameter {exc.args[0]!r} "
                         f"(in '{line.strip()}')") from exc
    except ValueError as exc:  # a '$' that starts no placeholder
        raise ValueError(f"shader {shader}: {exc} (in '{line.strip()}')") from exc


def _expand(path: str, seen: set[str], params: dict[str, str], shader: str) -> list[str]:
    seen.add(path)
    lines = []
    for line in _source(path).splitlines():
        if line.startswith(INCLUDE):
            name = _include_name(line, params, shader)
            if name not in seen:
                try:
                    lines.extend(_expand(name, seen, params, shader))
                except FileNotFoundError as exc:  # a variant name that has no file
                    raise ValueError(f"shader {shader} includes {name}, which does not "
                                     "exist") from exc
            continue
        lines.append(line)
    return lines


@functools.lru_cache(maxsize=1024)
def _expanded(path: str, prelude: str | None, params: Params) -> str:
    seen: set[str] = set()
    named = dict(params)
    lines = _expand(prelude, seen, named, path) if prelude else []
    return "\n".join(lines + _expand(path, seen, named, path))


def expanded(path: str, prelude: str | None = None, **params) -> str:
    """The text of ``shaders/<path>`` with its includes expanded (not specialised); ``params``
    fill placeholders in include lines only."""
    return _expanded(path, prelude, _key(params))


@functools.lru_cache(maxsize=4096)
def _render(path: str, prelude: str | None, params: Params) -> str:
    try:
        return Template(_expanded(path, prelude, params)).substitute(dict(params))
    except KeyError as exc:
        raise ValueError(f"shader {path} needs the parameter {exc.args[0]!r}") from exc
    except ValueError as exc:  # a '$' that starts no placeholder
        raise ValueError(f"shader {path}: {exc}") from exc


def _key(params: dict) -> Params:
    return tuple(sorted((k, str(v)) for k, v in params.items()))


def load_shader(path: str, prelude: str | None = None, **params) -> str:
    """WGSL text of ``shaders/<path>``, includes expanded (``prelude`` first), ``${name}``
    placeholders filled from ``params``."""
    return _render(path, prelude, _key(params))
