"""Which component ids can work: an id names the component's Python module and
its directories, so it must be a usable, unshadowed module name.

Checked when a tree is loaded, before anything is written or paid for: a
component called ``class`` (a keyword), ``json`` (the standard library),
``pytest`` or ``conftest`` (the harness) or one longer than a file name allows
would otherwise fail only after its contract and tests were authored.
"""

from __future__ import annotations

import keyword
import re
import sys

#: Component ids become file and module names, so they are restricted to a safe alphabet.
COMPONENT_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Longest id accepted: it appears in paths such as ``.pact/implementations/<id>/src/<id>.py``
#: and in temporary names beside them, each limited to 255 bytes by common file systems.
MAX_COMPONENT_ID_LEN = 100

#: Top-level module names an implementation may not define: they would replace
#: the harness's own tools on PYTHONPATH.
RESERVED_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "iniconfig", "conftest", "sitecustomize", "usercustomize"}
)


def component_id_problem(component_id: str) -> str | None:
    """Why ``component_id`` cannot name a component, or None when it can."""
    cid = component_id
    if not COMPONENT_ID_RE.match(cid):
        return (
            "id must be a Python identifier (letters, digits, '_'), because it names the "
            "component's module"
        )
    if len(cid) > MAX_COMPONENT_ID_LEN:
        return (
            f"id is {len(cid)} characters long; at most {MAX_COMPONENT_ID_LEN} are allowed "
            "because it names the component's files"
        )
    if keyword.iskeyword(cid):
        return "id is a Python keyword, so no module can be imported under that name; rename it"
    if cid.startswith("__") and cid.endswith("__"):
        return "id is a dunder name reserved by Python (e.g. __init__); rename it"
    if cid in RESERVED_MODULES:
        return f"id would shadow the test harness's module {cid!r}; rename it"
    if cid in sys.stdlib_module_names:
        return (
            f"id would shadow the standard library module {cid!r} for the component and "
            "everything that imports it; rename it (e.g. add a prefix)"
        )
    return None
