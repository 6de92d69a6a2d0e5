"""Dependency names: read a contract's names as the tree's component ids (seed 000, 2.1, 2.3).

A model often writes a component id slightly wrong (``schemas_shaping`` for
``shaping_schemas``). :func:`normalize_dependency_name` reads such a name as the id
it means, by these rules, in order, stopping at the first that decides:

1. exact: the name is an id;
2. case: the name equals one id ignoring case (and ``-`` or a space for ``_``);
3. transposition: the name has the same words as one id in another order;
4. affix: dropping the first or last word of the name gives an id, or dropping the
   first or last word of an id gives the name (``my_schemas`` -> ``schemas``).

A rule that matches more than one id decides "no match": normalization never
guesses. Dotted names (``agents.base``) are module paths and only match exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class DependencyKind(StrEnum):
    #: A component of this decomposition: it must have a contract.
    INTERNAL = "internal"
    #: A module of an existing code base: it must be importable or in the source tree.
    EXTERNAL = "external"


class MatchRule(StrEnum):
    EXACT = "exact"
    CASE = "case"
    TRANSPOSITION = "transposition"
    AFFIX = "affix"


class ResolvedDependency(BaseModel):
    """One dependency of a contract, as validation resolved it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The component id (internal) or the module name as written (external).
    component_id: str
    kind: DependencyKind
    #: For an external dependency found in the source tree: the file or package found.
    resolved_path: Path | None = None
    #: For an internal dependency: its contract exists.
    contract_exists: bool = False
    #: The name the contract wrote (differs from ``component_id`` when it was corrected).
    written: str = ""
    #: For an external dependency: importable in the run's environment.
    importable: bool = False


@dataclass(frozen=True)
class NameMatch:
    component_id: str
    rule: MatchRule


def canonical(name: str) -> str:
    """Case-folded, with ``-`` and spaces read as ``_``."""
    return name.strip().casefold().replace("-", "_").replace(" ", "_")


def _words(name: str) -> list[str]:
    return [w for w in canonical(name).split("_") if w]


def _affixes(words: Sequence[str]) -> set[str]:
    """The name without its first word and without its last word (two words or more)."""
    if len(words) < 2:
        return set()
    return {"_".join(words[1:]), "_".join(words[:-1])}


class NameIndex:
    """The ids of one tree, indexed once for every rule (a run checks many names)."""

    def __init__(self, known_ids: Iterable[str]) -> None:
        self.ids = frozenset(known_ids)
        self._by_canonical: dict[str, set[str]] = {}
        self._by_words: dict[tuple[str, ...], set[str]] = {}
        self._by_affix: dict[str, set[str]] = {}
        for cid in self.ids:
            words = _words(cid)
            self._by_canonical.setdefault(canonical(cid), set()).add(cid)
            if len(words) >= 2:
                self._by_words.setdefault(tuple(sorted(words)), set()).add(cid)
            for affix in _affixes(words):
                self._by_affix.setdefault(affix, set()).add(cid)
        digest = hashlib.sha256("\0".join(sorted(self.ids)).encode()).hexdigest()
        #: Identifies this set of ids (part of a cached check's context).
        self.fingerprint = digest[:16]

    def match(self, raw: str) -> NameMatch | None:
        """The id ``raw`` means and the rule that said so; None: none, or ambiguous."""
        name = raw.strip()
        if name in self.ids:
            return NameMatch(name, MatchRule.EXACT)
        if not name or "." in name or "/" in name:
            return None
        same = self._by_canonical.get(canonical(name), set())
        if same:
            return _only(same, MatchRule.CASE)
        words = _words(name)
        if len(words) >= 2:
            moved = self._by_words.get(tuple(sorted(words)), set())
            if moved:
                return _only(moved, MatchRule.TRANSPOSITION)
        found: set[str] = set()
        for affix in _affixes(words):
            found |= self._by_canonical.get(affix, set())
        found |= self._by_affix.get("_".join(words), set())
        return _only(found, MatchRule.AFFIX) if found else None


def _only(candidates: set[str], rule: MatchRule) -> NameMatch | None:
    return NameMatch(next(iter(candidates)), rule) if len(candidates) == 1 else None


def normalize_dependency_name(raw: str, known_ids: Sequence[str] | NameIndex) -> str | None:
    """The member of ``known_ids`` that ``raw`` names, or None (see the module's rules).

    Deterministic, and always a member of ``known_ids`` or None: an ambiguous name
    matches nothing. The caller records a corrected name (an event in a run).
    """
    index = known_ids if isinstance(known_ids, NameIndex) else NameIndex(known_ids)
    found = index.match(raw)
    return found.component_id if found else None
