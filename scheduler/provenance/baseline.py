"""Artifact baselines (6.2): what was verified.

A baseline is captured when a component's implementation (or composition) is promoted,
and only when the harness's tests all passed: it holds the SHA-256 of the contract, of
the test suite and of the implementation as they were verified, and the contract's
version, and the stat signature of its files. ``pact status`` and ``pact validate``
compare the disk against it (:mod:`scheduler.provenance.drift`):

- the contract changed but the tests did not: an **error** (the tests no longer check
  what the contract says);
- the implementation changed while the contract's version did not: a **warning** (hand
  edits that no verification covers);
- the tests changed (alone, or with the contract): a **warning** (re-verify);
- a verified file is gone: an **error**.

Stored in ``.pact/baselines/<component_id>.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.errors import PactError
from pact_workers.files import atomic_write
from pact_workers.gcpause import collector_paused
from pact_workers.models.testing import TestResults

Severity = Literal["error", "warning"]
Artifact = Literal["contract", "tests", "implementation"]


class BaselineError(PactError):
    """A baseline cannot be captured (the tests did not pass, or were never run)."""


class ArtifactBaseline(BaseModel):
    """Hash baseline for drift detection."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    component_id: str
    contract_hash: str = Field(description="SHA256 of interface.json")
    test_hash: str = Field(description="SHA256 of contract_test.py")
    impl_hash: str = Field(description="SHA256 of implementation files concatenated")
    captured_at: str = Field(description="ISO 8601 timestamp")
    test_results: TestResults | None = None
    #: The contract's ``version`` when captured (a bump explains implementation changes).
    contract_version: int = 1
    #: (size, mtime_ns) of every file hashed, as captured (``interface.json``,
    #: ``tests/<file>``, ``src/<file>``), and (0, mtime_ns) of each directory holding
    #: them (``tests/``, ``src/``, ``src/<dir>/``: a file added, removed or renamed
    #: changes its directory's mtime): when none changed, nothing is read again. Empty
    #: for a baseline made from the store, which is then always compared by hash.
    stats: dict[str, tuple[int, int]] = Field(default_factory=dict)


def artifact_paths(project_dir: Path, component_id: str) -> tuple[Path, Path, Path]:
    interface, tests, src = _path_strs(project_dir, component_id)
    return Path(interface), Path(tests), Path(src)


def _path_strs(project_dir: Path, component_id: str) -> tuple[str, str, str]:
    """:func:`artifact_paths` as plain strings (what a pass over every component uses)."""
    # Joined by hand: component ids are plain names, and os.path.join was most of the
    # cost of a pass over 10,000 components.
    pact = f"{os.fspath(project_dir)}/.pact"
    contract_dir = f"{pact}/contracts/{component_id}"
    return (
        f"{contract_dir}/interface.json",
        f"{contract_dir}/tests",
        f"{pact}/implementations/{component_id}/src",
    )


def baseline_path(project_dir: Path, component_id: str) -> Path:
    return Path(_baseline_str(project_dir, component_id))


def _baseline_str(project_dir: Path, component_id: str) -> str:
    return f"{os.fspath(project_dir)}/.pact/baselines/{component_id}.json"


def hash_file(path: Path) -> str:
    """SHA-256 of a file's bytes; empty when it is missing."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def hash_files(files: Mapping[str, bytes]) -> str:
    """SHA-256 over files given as relative name -> bytes (sorted by name); empty for
    none. The same files hash the same whether read from disk or from the store."""
    if not files:
        return ""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        digest.update(files[name] + b"\0")
    return digest.hexdigest()


def hash_tree(root: Path) -> str:
    """:func:`hash_files` of every file under ``root`` (the interpreter's caches left
    out: running the tests by hand must not look like an edit). Directories that are
    symbolic links are not entered; files that are, are read."""
    top = os.fspath(root)
    if not os.path.isdir(top):
        return ""
    files: dict[str, bytes] = {}
    for rel, entry in verified_files(top):
        with open(entry.path, "rb") as fh:
            files[rel] = fh.read()
    return hash_files(files)


def verified_files(
    root: str, on_dir: Callable[[str, str], None] | None = None
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """The files under ``root`` a verification covers, what :func:`hash_tree` reads and
    the stat signature records: every file but the interpreter's caches (``__pycache__``
    and compiled modules), nothing under a linked directory. ``on_dir`` as for
    :func:`files_below`."""
    if "/__pycache__/" in f"/{root}/":
        return  # nothing under a cache is verified
    # Plain strings: pathlib's rglob was most of a promotion's hashing.
    for rel, entry in files_below(root, skip="__pycache__", on_dir=on_dir):
        if entry.is_file() and not _compiled(entry.name):
            yield rel, entry


def files_below(
    root: str, *, skip: str = "", on_dir: Callable[[str, str], None] | None = None
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(path relative to ``root``, entry) of everything under ``root`` that is not a
    directory. Directories that are symbolic links, or named ``skip``, are not
    entered; one that cannot be listed is passed over. ``on_dir`` is called with
    (relative path, ``""`` for ``root`` and ending in ``/`` otherwise; path) of each
    directory entered, once it is open and before any of its entries is read."""
    stack = [(root, "")]
    while stack:
        path, at = stack.pop()
        try:
            entries = os.scandir(path)
        except OSError:
            continue
        with entries:
            if on_dir is not None:
                on_dir(at, path)
            for entry in entries:
                if not entry.is_dir():
                    yield at + entry.name, entry
                elif entry.name != skip and not entry.is_symlink():
                    stack.append((entry.path, f"{at}{entry.name}/"))


def _compiled(name: str) -> bool:
    """A ``.pyc`` file (``Path.suffix``'s sense: a name that is only ``.pyc`` has none)."""
    return name.endswith(".pyc") and len(name) > len(".pyc")


def _stat_tree(root: str, prefix: str, out: dict[str, tuple[int, int]]) -> None:
    """(size, mtime_ns) of the files :func:`hash_tree` reads, by ``prefix`` + name, and
    (0, mtime_ns) of the directories holding them, by ``prefix`` + path + ``/``: the
    same walk as :func:`hash_tree`'s, so a file it reads is always in the signature."""

    def listed(at: str, path: str) -> None:
        # Before the entries are read: a file added while they are has changed it.
        try:
            out[prefix + at] = (0, os.stat(path).st_mtime_ns)
        except OSError:
            pass

    for rel, entry in verified_files(root, on_dir=listed):
        info = entry.stat()
        out[prefix + rel] = (info.st_size, info.st_mtime_ns)


def file_stats(project_dir: Path, component_id: str) -> dict[str, tuple[int, int]]:
    """The stat signature of a component's verified files (see ``ArtifactBaseline``)."""
    interface, tests, src = _path_strs(project_dir, component_id)
    out: dict[str, tuple[int, int]] = {}
    try:
        info = os.stat(interface)
        out["interface.json"] = (info.st_size, info.st_mtime_ns)
    except OSError:
        pass
    _stat_tree(tests, "tests/", out)
    _stat_tree(src, "src/", out)
    return out


def _files_only(stats: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {name: sig for name, sig in stats.items() if not name.endswith("/")}


def _same_by_name(project_dir: Path, component_id: str, stats: Mapping[str, Any]) -> bool:
    """Every file and directory of a signature that names its directories, stat'd by
    name, as captured: one ``stat`` each, no directory listed."""
    interface, tests, src = _path_strs(project_dir, component_id)
    roots = {"tests": tests + "/", "src": src + "/"}  # joined by hand, as in _path_strs
    for name, (size, mtime) in stats.items():
        if name == "interface.json":
            path = interface
        else:
            top, _, rest = name.partition("/")
            root = roots.get(top)
            if root is None:
                return False
            path = root + rest
        try:
            info = os.stat(path)
        except OSError:
            return False
        if info.st_mtime_ns != mtime or (not name.endswith("/") and info.st_size != size):
            return False
    return True


def untouched(project_dir: Path, baseline: ArtifactBaseline) -> bool:
    """True when the component's verified files are exactly as ``baseline`` captured
    them, by their stat signature (nothing is read). A signature naming its directories
    is checked by name first; when a directory changed (or the signature predates them),
    the files are listed, leaving out the interpreter's caches (running the tests by
    hand adds ``__pycache__`` and so changes ``src/``'s mtime, but no verified file)."""
    stats = baseline.stats
    if not stats:
        return False
    cid = baseline.component_id
    if "src/" in stats and _same_by_name(project_dir, cid, stats):
        return True
    return _files_only(file_stats(project_dir, cid)) == _files_only(stats)


def contract_version(interface: Path) -> int:
    """The ``version`` the contract declares (1 when missing or unreadable)."""
    try:
        st = os.stat(interface)
    except OSError:
        return 1
    # Promotion asks three times per component (a sidecar each, and the baseline): the
    # file is read again only when ``stat`` says it changed (it is replaced by rename).
    key = (os.fspath(interface), st.st_ino, st.st_mtime_ns, st.st_size)
    version = _VERSIONS.get(key)
    if version is None:
        version = _read_contract_version(interface)
        if len(_VERSIONS) >= 4096:
            _VERSIONS.clear()
        _VERSIONS[key] = version
    return version


#: Contract versions read, by path and what ``stat`` said of the file.
_VERSIONS: dict[tuple[str, int, int, int], int] = {}


def _read_contract_version(interface: Path) -> int:
    try:
        value = json.loads(interface.read_bytes()).get("version", 1)
    except (OSError, ValueError, AttributeError):
        return 1
    return value if isinstance(value, int) else 1


def capture_baseline(component_id: str, project_dir: Path) -> ArtifactBaseline:
    """Capture current hashes for a component's artifacts.

    Raises:
        BaselineError: the component's verified test results are missing, or not every
            test passed: a baseline records only verified work.
    """
    interface, tests, src = artifact_paths(project_dir, component_id)
    results_path = src.parent / "test_results.json"
    try:
        results = TestResults.model_validate_json(results_path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise BaselineError(
            f"{component_id}: no verified test results at {results_path}; a baseline is "
            "captured only after the contract tests pass"
        ) from exc
    if not results.all_passed:
        raise BaselineError(
            f"{component_id}: the contract tests did not all pass ({results.summary()}); "
            "no baseline captured"
        )
    stats = file_stats(project_dir, component_id)
    return ArtifactBaseline(
        component_id=component_id,
        contract_hash=hash_file(interface),
        test_hash=hash_tree(tests),
        impl_hash=hash_tree(src),
        captured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        test_results=results,
        contract_version=contract_version(interface),
        stats=stats,
    )


def baseline_from_verified(
    component_id: str,
    *,
    contract: bytes,
    tests: Mapping[str, bytes],
    src: Mapping[str, bytes],
    results: TestResults | None,
    captured_at: str,
) -> ArtifactBaseline:
    """The baseline of verified outputs as the artifact store holds them (paths relative
    to ``tests/`` and ``src/``): how a rebuild re-creates a lost baseline without
    trusting files that may have been edited since.

    Raises:
        BaselineError: the outputs were not verified by passing tests.
    """
    if results is None or not results.all_passed:
        raise BaselineError(f"{component_id}: no passing test results; no baseline captured")
    version = 1
    try:
        loaded = json.loads(contract).get("version", 1)
        version = loaded if isinstance(loaded, int) else 1
    except (ValueError, AttributeError):
        pass
    return ArtifactBaseline(
        component_id=component_id,
        contract_hash=hashlib.sha256(contract).hexdigest(),
        test_hash=hash_files(tests),
        impl_hash=hash_files(src),
        captured_at=captured_at,
        test_results=results,
        contract_version=version,
    )


def write_baseline(project_dir: Path, baseline: ArtifactBaseline) -> None:
    """Write ``baseline`` whole or not at all. Not fsynced: a baseline lost with the
    machine is re-made from the log and the store on resume or rebuild."""
    data = baseline.model_dump_json(indent=2).encode() + b"\n"
    atomic_write(baseline_path(project_dir, baseline.component_id), data, fsync=False)


def read_baseline(project_dir: Path, component_id: str) -> ArtifactBaseline | None:
    try:
        with open(_baseline_str(project_dir, component_id), "rb") as fh:
            return ArtifactBaseline.model_validate_json(fh.read())
    except (OSError, ValidationError):
        return None


def read_baselines(project_dir: Path) -> dict[str, ArtifactBaseline]:
    """Every baseline of the project, by component id (read with the cyclic collector
    paused: a large project has one per component)."""
    found: dict[str, ArtifactBaseline] = {}
    root = project_dir / ".pact" / "baselines"
    try:
        names = sorted(e.name for e in os.scandir(root) if e.name.endswith(".json"))
    except OSError:
        return found
    with collector_paused():
        for name in names:
            baseline = read_baseline(project_dir, name.removesuffix(".json"))
            if baseline is not None:
                found[baseline.component_id] = baseline
    return found
