"""External dependencies: names that are no component must name something that exists.

An external dependency exists when it is importable in the run's environment (the
harness checks that in the sandbox that verifies the contract, so a Docker run checks
the image) or when the project's source tree holds it: ``a.b`` as ``a/b.py``,
``a/b/__init__.py`` or a directory ``a/b`` (a namespace package), at the top of the
source tree or under its ``src/``; a name written as a path (``mesh/mesh.py``) must be
that file or directory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

#: Whether a module name is importable: True, False, or None when nobody checked.
Importable = Callable[[str], bool | None]

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def is_module_name(name: str) -> bool:
    """``a`` or ``a.b.c`` with Python identifiers (what an import statement can name)."""
    return _MODULE.fullmatch(name) is not None


def is_path_name(name: str) -> bool:
    return "/" in name or name.endswith(".py")


def unchecked(_name: str) -> bool | None:
    """The :data:`Importable` of a caller that cannot check importability."""
    return None


def find_in_source_tree(name: str, source_tree: Path | None) -> Path | None:
    """The file or directory of ``source_tree`` that provides ``name``, relative to it."""
    if source_tree is None or not source_tree.is_dir():
        return None
    if is_path_name(name):
        rel = Path(name.strip().lstrip("/"))
        if ".." in rel.parts:
            return None
        candidates = [rel, Path("src") / rel]
    elif is_module_name(name):
        base = Path(*name.split("."))
        candidates = []
        for root in (Path(), Path("src")):
            candidates += [
                root / base.with_suffix(".py"),
                root / base / "__init__.py",
                root / base,
            ]
    else:
        return None
    for candidate in candidates:
        if (source_tree / candidate).exists():
            return candidate
    return None
