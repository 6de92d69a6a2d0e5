"""The on-disk layout of a project directory, and atomic writes into it.

::

    <project>/pact.yaml                                  settings (optional)
    <project>/.pact/audit.jsonl                          the event log (source of truth)
    <project>/.pact/state.json                           snapshot, rebuilt from the log
    <project>/.pact/decomposition/tree.json              the tree as submitted
    <project>/.pact/artifacts/                           content-addressed blobs (staging)
    <project>/.pact/contracts/<c>/interface.json         verified contract
    <project>/.pact/contracts/<c>/tests/contract_test.py verified contract tests
    <project>/.pact/implementations/<c>/src/...          verified implementation
    <project>/.pact/implementations/<c>/test_results.json

Agent output lives only in the artifact store until the harness verified it;
then :meth:`ProjectDir.promote` moves it into place atomically. Promoted files are
not fsynced one by one: :meth:`ProjectDir.sync` makes them durable together, and the
run loop calls it before it commits the events that say they were promoted (a crash
before that commit leaves the item unpromoted in the log, and the next run of the
loop promotes it again from the store).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
from pact_workers.errors import RunDirError
from pact_workers.files import atomic_write, deferred_sync, new_directory, write_file
from pact_workers.models.documents import not_a_directory
from pact_workers.models.testing import TestResults
from pact_workers.models.work import Phase
from pact_workers.sandbox.base import safe_relpath
from scheduler.snapshot import parse_state_json, snapshot_bytes
from scheduler.state import RunState


def _relative_to(path: str, root: str) -> str:
    """``os.path.relpath(path, root)`` for a path made by joining names to ``root``:
    the prefix cut off rather than both paths made absolute and compared."""
    head = root if root.endswith("/") else f"{root}/"
    if path.startswith(head):
        return path[len(head) :]
    return os.path.relpath(path, root)


class ProjectDir:
    """Paths and safe writes for one project (one run)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.pact = self.root / ".pact"
        self.audit_path = self.pact / "audit.jsonl"
        self.state_path = self.pact / "state.json"
        self.tree_path = self.pact / "decomposition" / "tree.json"
        self.settings_path = self.root / "pact.yaml"
        self.artifacts_dir = self.pact / "artifacts"
        self.contracts_dir = self.pact / "contracts"
        self.implementations_dir = self.pact / "implementations"
        self._root = str(self.root)
        self._contracts = str(self.contracts_dir)
        self._implementations = str(self.implementations_dir)

    def has_run(self) -> bool:
        return self.audit_path.exists()

    def require_run(self) -> None:
        """The project directory exists and has a run log (whether the log holds a run
        is known only once it is read).

        Raises:
            RunDirError: naming the path: no such directory, not a directory, no log.
        """
        if not self.root.is_dir():
            raise RunDirError(
                f"{self.root}: {not_a_directory(self.root)}; give the project directory of a run"
            )
        if not self.has_run():
            raise RunDirError(
                f"{self.root}: no pact run here (missing .pact/audit.jsonl); start one with "
                "`pact run TREE --project DIR`"
            )

    def store(self, *, deferred: bool = False) -> ArtifactStore:
        """The run's artifact store; ``deferred``: blobs are made durable together by
        the store's ``sync`` (what a run loop does before each commit)."""
        return ArtifactStore(DirectoryBlobStore(self.artifacts_dir, deferred=deferred))

    def write_state(self, state: RunState, *, log_offset: int | None = None) -> None:
        """Write ``state`` as the snapshot of the log up to ``log_offset`` bytes (default:
        the whole log as it is on disk now), atomically, compactly and marked (see
        :mod:`scheduler.snapshot`). The state must cover exactly those events.

        Raises:
            RunDirError: something other than a file stands where the snapshot goes.
        """
        data = snapshot_bytes(state, self.audit_path, log_offset)
        try:
            atomic_write(self.state_path, data)
        except IsADirectoryError:
            raise RunDirError(
                f"{self.state_path}: is a directory, where the run's state snapshot goes; "
                "nothing is lost (the audit log holds the run): move that directory away, "
                "then run `pact rebuild`"
            ) from None

    def sync(self) -> None:
        """Make every file promoted so far durable: one sync of each file system that
        deferred writes went to (the run's blobs too, when they share it)."""
        deferred_sync.sync()

    def read_state(self) -> RunState:
        try:
            return parse_state_json(self.state_path.read_bytes()).state
        except FileNotFoundError:
            raise RunDirError(f"{self.state_path}: missing; run `pact rebuild`") from None

    def destination(self, component_id: str, phase: Phase) -> Path:
        """Where a work item's verified files are promoted."""
        return Path(self.destination_str(component_id, phase))

    def destination_str(self, component_id: str, phase: Phase) -> str:
        """:meth:`destination` as a plain string (for loops over every item of a run;
        component ids are identifiers, so plain concatenation joins them)."""
        if phase is Phase.CONTRACT:
            return f"{self._contracts}/{component_id}"
        if phase is Phase.TEST:
            return f"{self._contracts}/{component_id}/tests"
        return f"{self._implementations}/{component_id}/src"

    def files_missing(
        self,
        component_id: str,
        phase: Phase,
        output: str | None,
        store: ArtifactStore,
        files: Sequence[str] = (),
    ) -> bool:
        """True when verified ``output`` has files missing from where it was promoted.
        ``files``: its paths as the log recorded them (its manifest's), which spares
        reading the manifest from the store (a run of 10,000 components opens faster
        by a second); without them the manifest is read."""
        if output is None:
            return False
        if phase is Phase.CONTRACT:
            paths: Iterable[str] = ("interface.json",)
        else:
            paths = files or store.get_manifest(output)
        return any(
            not os.path.isfile(self.promoted_path(component_id, phase, rel)) for rel in paths
        )

    def promoted_path(self, component_id: str, phase: Phase, rel: str) -> str:
        """Where the verified file ``rel`` (its path in the output's bundle, e.g.
        ``src/x.py``) lives once promoted: a plain string, for loops over every file."""
        name = "interface.json" if phase is Phase.CONTRACT else rel.split("/", 1)[1]
        return f"{self.destination_str(component_id, phase)}/{name}"

    def promote(
        self,
        component_id: str,
        phase: Phase,
        files: Mapping[str, bytes],
        test_results: TestResults | None = None,
    ) -> list[str]:
        """Move verified output into the project; returns project-relative paths written.

        The contract is one file replaced atomically. Tests and implementations
        replace their whole directory, so files a new attempt deleted or renamed
        disappear too; the old directory is swapped out by rename before removal.
        Durable at the next :meth:`sync`.
        """
        written: list[str] = []
        if phase is Phase.CONTRACT:
            target = self.contracts_dir / component_id / "interface.json"
            atomic_write(target, files["interface.json"], fsync=False)
            written.append(target.relative_to(self.root).as_posix())
            deferred_sync.wrote(self._root)
            return written
        prefix = "tests/" if phase is Phase.TEST else "src/"
        root = str(self.root)
        dest = self.destination_str(component_id, phase)
        parent, name = os.path.split(dest)
        os.makedirs(parent, exist_ok=True)
        staging = new_directory(parent, f".{name}.new-")
        made = {staging}
        relative = _relative_to(dest, root)
        for path, data in sorted(files.items()):
            rel = safe_relpath(path)
            if not rel.startswith(prefix):
                continue
            inside = rel.removeprefix(prefix)
            out = os.path.join(staging, inside)
            folder = os.path.dirname(out)
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            write_file(out, data)
            written.append(f"{relative}/{inside}")
        old = None
        if os.path.exists(dest):
            old = os.path.join(parent, f".{name}.old-{os.getpid()}")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(dest, old)
        os.replace(staging, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        if test_results is not None:
            results_path = os.path.join(parent, "test_results.json")
            data = test_results.model_dump_json(indent=2).encode() + b"\n"
            atomic_write(results_path, data, fsync=False)
            written.append(_relative_to(results_path, root))
        deferred_sync.wrote(self._root)
        return written

    def sweep_staging(self) -> None:
        """Remove half-promoted leftovers a crash may have left behind: staged and
        swapped-out directories, and the temporary files of atomic writes."""
        for base in (self._contracts, self._implementations):
            # One listing of each component's directory (a run of 10,000 components
            # has 20,000 of them): only its dot-entries can be leftovers.
            for component in _entries(base):
                if component.name.startswith(".") or not component.is_dir():
                    continue
                for entry in _entries(component.path):
                    if not entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if ".new-" in entry.name or ".old-" in entry.name:
                            shutil.rmtree(entry.path, ignore_errors=True)
                    elif entry.is_file():
                        # The temporary file of an atomic write (``.<name>.<pid>.<n>``)
                        # of whatever is written there: a contract, test results, a
                        # provenance sidecar. No other file there starts with a dot.
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.path)
        # Baselines are written atomically too, each its own file in one directory.
        for leftover in (self.pact / "baselines").glob(".*"):
            if leftover.is_file():
                leftover.unlink(missing_ok=True)
        if self.state_path.parent.exists():
            for leftover in self.state_path.parent.glob(f".{self.state_path.name}.*"):
                leftover.unlink(missing_ok=True)


def _entries(path: str) -> list[os.DirEntry[str]]:
    """The entries of directory ``path`` (none when it is not there)."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []
