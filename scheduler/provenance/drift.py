"""Drift (6.2): how a component's files on disk differ from its baseline, and with
what severity (the rules are in :mod:`scheduler.provenance.baseline`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scheduler.provenance.baseline import (
    Artifact,
    ArtifactBaseline,
    Severity,
    artifact_paths,
    contract_version,
    hash_file,
    hash_tree,
    read_baselines,
    untouched,
)


class DriftFinding(BaseModel):
    """One way a component's files differ from what was verified."""

    model_config = ConfigDict(frozen=True)

    component_id: str
    artifact: Artifact
    severity: Severity
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


def check_drift(baseline: ArtifactBaseline, project_dir: Path) -> list[DriftFinding]:
    """How the component's files differ from ``baseline``, each with its severity."""
    cid = baseline.component_id
    if untouched(project_dir, baseline):
        return []  # not one file touched since it was verified: nothing to hash
    interface, tests, src = artifact_paths(project_dir, cid)
    found: list[DriftFinding] = []

    def add(artifact: Artifact, sev: Severity, msg: str) -> None:
        found.append(DriftFinding(component_id=cid, artifact=artifact, severity=sev, message=msg))

    contract_now = hash_file(interface)
    tests_now = hash_tree(tests)
    impl_now = hash_tree(src)
    contract_changed = contract_now != baseline.contract_hash
    tests_changed = tests_now != baseline.test_hash
    present: tuple[tuple[Artifact, Path, str], ...] = (
        ("contract", interface, contract_now),
        ("tests", tests, tests_now),
        ("implementation", src, impl_now),
    )
    for artifact, path, now in present:
        if not now:
            add(artifact, "error", f"{cid}: verified {artifact} is missing ({path.name})")
    if contract_changed and contract_now and not tests_changed:
        add(
            "contract",
            "error",
            f"{cid}: contract changed (hash mismatch) but its tests were not updated; "
            "re-run the test phase (`pact resume DIR --from-phase contract`)",
        )
    elif tests_changed and tests_now:
        changed = "contract and tests" if contract_changed else "tests"
        add("tests", "warning", f"{cid}: {changed} changed since verification; re-verify")
    if impl_now and impl_now != baseline.impl_hash:
        version_now = contract_version(interface)
        if version_now == baseline.contract_version:
            add(
                "implementation",
                "warning",
                f"{cid}: implementation changed (hash mismatch) but contract version "
                f"unchanged ({version_now})",
            )
        else:
            add(
                "implementation",
                "warning",
                f"{cid}: implementation changed with the contract version "
                f"{baseline.contract_version} -> {version_now}; re-verify it",
            )
    return found


def detect_drift(baseline: ArtifactBaseline, project_dir: Path) -> list[str]:
    """Compare current file hashes against baseline.

    Returns:
        One description per drift, led by its severity, e.g. ``"warning: c:
        implementation changed (hash mismatch) but contract version unchanged (1)"``.
    """
    return [str(f) for f in check_drift(baseline, project_dir)]


@dataclass(frozen=True)
class ProjectDrift:
    """Drift of every component with a baseline, and the components whose verified
    files were found exactly as captured (every file there, by size and mtime: the
    other checks of those files, such as that each is present, have nothing to add)."""

    findings: list[DriftFinding]
    untouched: frozenset[str]


def check_project_drift(
    project_dir: Path, baselines: Mapping[str, ArtifactBaseline] | None = None
) -> ProjectDrift:
    """:class:`ProjectDrift` of the project; ``baselines`` as :func:`read_baselines`
    gives them, when the caller has them."""
    if baselines is None:
        baselines = read_baselines(project_dir)
    findings: list[DriftFinding] = []
    same: set[str] = set()
    for cid, baseline in baselines.items():
        if untouched(project_dir, baseline):
            same.add(cid)
        else:
            findings += check_drift(baseline, project_dir)
    return ProjectDrift(findings, frozenset(same))


def project_drift(
    project_dir: Path, baselines: Mapping[str, ArtifactBaseline] | None = None
) -> list[DriftFinding]:
    """Drift of every component that has a baseline (what status and validate show)."""
    return check_project_drift(project_dir, baselines).findings
