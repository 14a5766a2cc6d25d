"""The one loader of WGSL sources in ``shaders/``, cached per specialisation.

Specialisation uses ``string.Template`` with ``substitute``: a placeholder without a
value is an error, never silently left in the source.
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template


@functools.cache
def _source(path: str) -> str:
    return resources.files("shaders").joinpath(path).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=4096)
def _render(path: str, params: tuple[tuple[str, str], ...]) -> str:
    try:
        return Template(_source(path)).substitute(dict(params))
    except KeyError as exc:
        raise ValueError(f"shader {path} needs the parameter {exc.args[0]!r}") from exc


def load_shader(path: str, **params) -> str:
    """WGSL text of ``shaders/<path>`` with ``${name}`` placeholders filled from ``params``."""
    return _render(path, tuple(sorted((k, str(v)) for k, v in params.items())))
