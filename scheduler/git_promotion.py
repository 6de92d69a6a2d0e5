"""Git promotion (A7-RT's COMMIT): with ``promote: git`` in pact.yaml, each verified
promotion becomes one commit in the project directory.

Rules:

- The project directory is the repository: the first promotion initialises one
  there unless the directory already lies inside a work tree, whose repository is
  then used.
- A commit holds exactly the files of one promotion (the item's destination
  directory, deletions and renames included) and nothing else a user may have
  staged: the commit is restricted to those paths.
- Its message names the component, the phase, the attempt, the run, the test
  counts and the cost; its author is ``promote_author`` (``Name <email>``).
- Only verified output that passed the regression check is promoted, so a violated
  promotion never reaches a commit. Promoting files identical to the last commit
  (a re-promotion after a crash) makes no empty commit.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pact_workers.errors import PactError
from pact_workers.models.testing import TestResults
from pact_workers.models.work import Phase, Usage

if TYPE_CHECKING:
    from scheduler.project import ProjectDir
    from scheduler.settings import Settings
    from scheduler.state import RunState

log = logging.getLogger(__name__)

#: ``Name <email>``, as git writes an author.
AUTHOR = re.compile(r"^(?P<name>[^<>\n]+?)\s*<(?P<email>[^<>\s]+)>$")
DEFAULT_AUTHOR = "pact-fleet <pact-fleet@localhost>"


class GitPromotionError(PactError):
    """git refused a promotion commit (what git said is in the message)."""


def commit_message(
    *,
    component_id: str,
    phase: Phase,
    attempt: int,
    run_id: str,
    test_results: TestResults | None,
    usage: Usage,
) -> str:
    """The commit's message: a subject line, then one fact per line."""
    tests = (
        f"{test_results.passed}/{test_results.total} passed, {test_results.failed} failed, "
        f"{test_results.errors} errors"
        if test_results is not None
        else "no tests run for this phase"
    )
    return (
        f"pact: {component_id} {phase.value} (attempt {attempt})\n\n"
        f"Component: {component_id}\n"
        f"Phase: {phase.value}\n"
        f"Attempt: {attempt}\n"
        f"Run: {run_id}\n"
        f"Tests: {tests}\n"
        f"Cost: ${usage.cost_usd:.4f} ({usage.input_tokens} input, "
        f"{usage.output_tokens} output tokens)\n"
    )


def commit_promotion(
    root: Path, paths: Sequence[str], *, message: str, author: str = DEFAULT_AUTHOR
) -> str | None:
    """Commit ``paths`` (project-relative: files or directories promoted, deleted
    files included) as one commit; the new commit's id, or None when nothing changed.

    Raises:
        GitPromotionError: git is missing or refused (the message says what git said).
    """
    match = AUTHOR.match(author)
    if match is None:
        raise GitPromotionError(f"promote_author {author!r}: write it as 'Name <email>'")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": match["name"],
        "GIT_AUTHOR_EMAIL": match["email"],
        "GIT_COMMITTER_NAME": match["name"],
        "GIT_COMMITTER_EMAIL": match["email"],
    }
    if not _inside_work_tree(root, env):
        _git(root, env, "init", "--quiet")
    specs = sorted(set(paths))
    if not specs:
        return None
    _git(root, env, "add", "--all", "--force", "--", *specs)
    staged = _git(root, env, "diff", "--cached", "--name-only", "--", *specs)
    if not staged.strip():
        return None
    _git(root, env, "commit", "--quiet", "--no-verify", "-m", message, "--", *specs)
    return _git(root, env, "rev-parse", "HEAD").strip()


def _inside_work_tree(root: Path, env: dict[str, str]) -> bool:
    probe = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == "true"


def _git(root: Path, env: dict[str, str], *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
    except FileNotFoundError as exc:
        raise GitPromotionError(
            "promote: git needs the git command; install git or set promote: files"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise GitPromotionError(f"git {args[0]} in {root} did not finish in 120 s") from exc
    if done.returncode != 0:
        raise GitPromotionError(
            f"git {args[0]} in {root} failed: {(done.stderr or done.stdout).strip()}"
        )
    return done.stdout


def promotion_paths(project_root: Path, destination: Path, written: Sequence[str]) -> list[str]:
    """What one promotion's commit holds: the files written and, for a directory the
    promotion replaced, the directory itself (so that deleted files leave with it)."""
    paths = set(written)
    if destination.is_dir() and destination.name in {"src", "tests"}:
        paths.add(destination.relative_to(project_root).as_posix())
    return sorted(paths)


def commit_item(
    project: ProjectDir,
    state: RunState,
    settings: Settings,
    component_id: str,
    phase: Phase,
    written: Sequence[str],
) -> str | None:
    """Commit one item's promotion (``promote: git``); the commit id, or None when the
    files were already committed. A commit git refuses is logged, never fatal: the
    files are promoted and the log says so; the next promotion commits them too."""
    item = state.item(component_id, phase)
    message = commit_message(
        component_id=component_id,
        phase=phase,
        attempt=item.attempt,
        run_id=state.run_id,
        test_results=item.test_results,
        usage=item.usage,
    )
    paths = promotion_paths(project.root, project.destination(component_id, phase), written)
    if phase is Phase.CONTRACT:
        paths = list(written)  # the contract's directory also holds its tests
    try:
        return commit_promotion(
            project.root, paths, message=message, author=settings.promote_author
        )
    except GitPromotionError as exc:
        log.warning("%s/%s: promoted but not committed: %s", component_id, phase.value, exc)
        return None
