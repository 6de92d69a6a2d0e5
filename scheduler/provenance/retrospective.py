"""Run retrospectives (6.4): what a finished run cost, where it struggled, what to do
differently next time.

Written automatically when a run ends, completed or failed, to
``.pact/retrospectives/<run_id>.json``. Everything comes from the audit log (timing,
cost, attempts, failures), the promoted contracts and test suites (sizes, error cases)
and the folded state (status). Lessons are built from what happened to named
components, tests and phases, with numbers; a lesson that matches a vague phrase of the
contract quality's anti-cliche list, or names nothing of the run, is dropped.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.files import atomic_write
from pact_workers.models.work import ErrorClass, Phase
from scheduler.audit import iter_events, last_event_of
from scheduler.events import (
    ContractChecked,
    ItemFailed,
    ItemSucceeded,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunStarted,
)
from scheduler.gates.events import GateWouldHaveBlocked
from scheduler.interview.recorded import InterviewRecorded
from scheduler.provenance.suites import error_cases, largest, suite_sizes
from scheduler.validation.quality import VAGUE_PATTERNS

#: Most lessons kept per retrospective (the most expensive problems first).
MAX_LESSONS = 12


class WouldHaveBlocked(BaseModel):
    """An item that advisory gates let through but blocking gates would have held."""

    model_config = ConfigDict(frozen=True)

    item: str = Field(description="component/phase")
    count: int = Field(description="How many of its work calls would have blocked")
    score: int = Field(description="Variety score of the latest one")
    reason: str = Field(description="Why, as the latest gate_would_have_blocked says")


class RunRetrospective(BaseModel):
    """Post-run analysis for future improvement."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    total_cost: float
    total_duration_seconds: float
    components_count: int
    plan_revisions: int = Field(description="How many contracts needed revision")
    largest_test_suite: tuple[str, int] = Field(description="(component_id, test_count)")
    most_error_cases: tuple[str, int] = Field(description="(component_id, error_count)")
    cost_distribution: dict[str, float] = Field(description="{component_id: cost}")
    failure_patterns: list[str] = Field(
        default_factory=list, description="Detected failure patterns"
    )
    lessons: list[str] = Field(default_factory=list, description="Inferred lessons for future runs")
    would_have_blocked: list[WouldHaveBlocked] = Field(
        default_factory=list,
        description="Advisory gates: the items blocking mode would have held, per item",
    )
    #: How the run ended (``completed``, ``failed``, or ``active``/``paused`` when
    #: generated before its end) and when this was written.
    status: str = ""
    generated_at: str = ""


def is_vague(text: str) -> bool:
    """True when ``text`` uses a phrase of the anti-cliche list."""
    return any(pattern.search(text) for pattern in VAGUE_PATTERNS)


def specific_lessons(lessons: list[str], names: set[str]) -> list[str]:
    """The lessons that are specific: no vague phrase, and each names a component,
    phase or test of the run (``names``). Duplicates go."""
    kept: dict[str, None] = {}
    for lesson in lessons:
        words = set(re.findall(r"[A-Za-z_][\w.]*", lesson))
        if lesson and not is_vague(lesson) and words & names:
            kept[lesson] = None
    return list(kept)[:MAX_LESSONS]


def _ts(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


#: The events the retrospective reads; the rest (a large run's dispatches and
#: promotions: most of its log) are not parsed. Its end is the log's last event.
_READ = tuple(
    str(kind.model_fields["type"].default)
    for kind in (
        RunStarted,
        ItemSucceeded,
        ItemFailed,
        InterviewRecorded,
        GateWouldHaveBlocked,
        ContractChecked,
        RunPaused,
        RunCompleted,
        RunFailed,
    )
)


def generate_retrospective(project_dir: Path) -> RunRetrospective:
    """Analyze a run (complete, or failed with partial work) and generate its
    retrospective; see the module docstring for the sources.

    Raises:
        ValueError: the project's log holds no run.
    """
    pact = project_dir / ".pact"
    # One pass over the log, keeping only what the retrospective reads (a log of a
    # 10,000-component run is tens of MB: never all of it in memory at once).
    started: RunStarted | None = None
    cost: dict[str, float] = defaultdict(float)
    failures: dict[tuple[str, Phase], list[ItemFailed]] = defaultdict(list)
    #: The attempt each accepted item passed with.
    accepted: dict[tuple[str, Phase], int] = {}
    rejected_contracts: Counter[str] = Counter()
    status = "active"
    pauses: list[RunPaused] = []
    fail_reason = ""
    planning = 0.0
    blocked: dict[str, WouldHaveBlocked] = {}
    log = pact / "audit.jsonl"
    for event in iter_events(log, types=_READ):
        if started is None and isinstance(event, RunStarted):
            started = event
        if isinstance(event, ItemSucceeded | ItemFailed):
            cost[event.component_id] += event.usage.cost_usd
        elif isinstance(event, InterviewRecorded):
            # What pact plan's interview and decomposition cost: the run's, no component's.
            planning += sum(u.cost_usd for u in event.usage.values())
        if isinstance(event, ItemSucceeded):
            accepted[(event.component_id, event.phase)] = event.attempt
        elif isinstance(event, ItemFailed):
            failures[(event.component_id, event.phase)].append(event)
        elif isinstance(event, GateWouldHaveBlocked):
            blocked[f"{event.component_id}/{event.phase.value}"] = _blocked(blocked, event)
        elif isinstance(event, ContractChecked) and not event.accepted:
            rejected_contracts[event.component_id] += 1
        elif isinstance(event, RunPaused):
            pauses.append(event)
            status = "paused"
        elif isinstance(event, RunCompleted):
            status = "completed"
        elif isinstance(event, RunFailed):
            status, fail_reason = "failed", event.reason
        elif isinstance(event, RunStarted):
            status = "active"
    if started is None:
        raise ValueError(f"{log}: holds no run")
    last = last_event_of(log)
    last_ts = last.ts if last is not None else ""
    tree_nodes = started.tree.get("nodes", {})
    components = list(tree_nodes) if isinstance(tree_nodes, dict) else []
    begin, end = _ts(started.ts), _ts(last_ts)
    duration = (end - begin).total_seconds() if begin and end else 0.0
    revisions = {
        cid
        for (cid, phase), failed in failures.items()
        if phase is Phase.CONTRACT and any(f.error_class is ErrorClass.PERMANENT for f in failed)
    } | set(rejected_contracts)
    sizes = suite_sizes(pact)
    patterns = _failure_patterns(failures, pauses, fail_reason)
    lessons = _lessons(failures, accepted, cost, pauses, fail_reason)
    names = {*components, *(p.value for p in Phase)}
    names |= {
        f.test_id.split("::")[-1]
        for fs in failures.values()
        for e in fs
        if e.test_results
        for f in e.test_results.failure_details
    }
    return RunRetrospective(
        run_id=started.run_id,
        total_cost=round(sum(cost.values()) + planning, 6),
        total_duration_seconds=round(max(duration, 0.0), 3),
        components_count=len(components),
        plan_revisions=len(revisions),
        largest_test_suite=largest(sizes),
        most_error_cases=largest(error_cases(pact)),
        cost_distribution={cid: round(cost.get(cid, 0.0), 6) for cid in components},
        failure_patterns=patterns,
        lessons=specific_lessons(lessons, names),
        would_have_blocked=[blocked[item] for item in sorted(blocked)],
        status=status,
        generated_at=last_ts,
    )


def _blocked(seen: dict[str, WouldHaveBlocked], event: GateWouldHaveBlocked) -> WouldHaveBlocked:
    """The item's count with ``event`` added; its score and reason are the latest."""
    item = f"{event.component_id}/{event.phase.value}"
    earlier = seen.get(item)
    return WouldHaveBlocked(
        item=item,
        count=(earlier.count if earlier else 0) + 1,
        score=event.score,
        reason=event.reason,
    )


def _failure_patterns(
    failures: dict[tuple[str, Phase], list[ItemFailed]],
    pauses: list[RunPaused],
    fail_reason: str,
) -> list[str]:
    """Failures that recur: the same error type in several components, systemic pauses."""
    by_type: dict[tuple[Phase, str], set[str]] = defaultdict(set)
    for (cid, phase), failed in failures.items():
        for event in failed:
            by_type[(phase, event.error_type or event.error_class.value)].add(cid)
    patterns = [
        f"{kind} in {phase.value} on {len(cids)} components: {', '.join(sorted(cids))}"
        for (phase, kind), cids in sorted(by_type.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        if len(cids) > 1
    ]
    patterns += [
        f"run paused ({p.pattern_type or 'pause'}): {_first_line(p.reason)}" for p in pauses
    ]
    if fail_reason:
        patterns.append(f"run failed: {_first_line(fail_reason)}")
    return patterns


def _lessons(
    failures: dict[tuple[str, Phase], list[ItemFailed]],
    accepted: dict[tuple[str, Phase], int],
    cost: dict[str, float],
    pauses: list[RunPaused],
    fail_reason: str,
) -> list[str]:
    lessons: list[tuple[float, str]] = []
    for (cid, phase), failed in failures.items():
        spent = sum(f.usage.cost_usd for f in failed)
        tests = [
            (d.test_id.split("::")[-1], _first_line(d.error_message, 120))
            for f in failed
            if f.test_results is not None
            for d in f.test_results.failure_details
        ]
        done = accepted.get((cid, phase))
        if tests:
            name, message = tests[0]
            more = f" and {len(tests) - 1} more" if len(tests) > 1 else ""
            outcome = f"attempt {done} passed" if done is not None else "it never passed"
            lessons.append(
                (
                    spent,
                    f"{cid}/{phase.value}: {len(failed)} rejected attempt(s) failed {name}"
                    f"{more} ({message}); {outcome}. Write code that satisfies {name}'s "
                    f"expectation in the contract of {cid} on the first attempt.",
                )
            )
        elif done is None:
            last = failed[-1]
            lessons.append(
                (
                    spent,
                    f"{cid}/{phase.value} gave up after {len(failed)} attempt(s) "
                    f"({last.error_type or last.error_class.value}: "
                    f"{_first_line(last.error, 120)}).",
                )
            )
        elif any(f.error_class is ErrorClass.TRANSIENT for f in failed):
            kinds = sorted({f.error_type or "transient" for f in failed})
            lessons.append(
                (
                    spent,
                    f"{cid}/{phase.value} needed {len(failed)} retry(ies) for "
                    f"{', '.join(kinds)} before attempt {done} passed.",
                )
            )
        elif phase is Phase.CONTRACT:
            lessons.append(
                (
                    spent,
                    f"{cid}/contract was revised {len(failed)} time(s) "
                    f"({_first_line(failed[-1].error, 120)}) before it was accepted.",
                )
            )
    for pause in pauses:
        lessons.append(
            (
                float("inf"),
                f"the run paused on {', '.join(pause.affected_components) or 'a component'}: "
                f"{_first_line(pause.reason, 160)}",
            )
        )
    if fail_reason and "budget" in fail_reason:
        priciest = max(sorted(cost.items()), key=lambda kv: kv[1], default=("", 0.0))
        if priciest[0]:
            lessons.append(
                (
                    float("inf"),
                    f"the budget ran out; {priciest[0]} cost the most "
                    f"(${priciest[1]:.4f}): raise budget_usd or split {priciest[0]}.",
                )
            )
    lessons.sort(key=lambda pair: -pair[0])
    return [text for _, text in lessons]


def retrospective_path(project_dir: Path, run_id: str) -> Path:
    return project_dir / ".pact" / "retrospectives" / f"{run_id}.json"


def write_retrospective(project_dir: Path) -> RunRetrospective:
    """Generate the run's retrospective and write it (atomically, replacing an earlier
    one of the same run, e.g. before a resume)."""
    retro = generate_retrospective(project_dir)
    data = retro.model_dump_json(indent=2).encode() + b"\n"
    atomic_write(retrospective_path(project_dir, retro.run_id), data)
    return retro


def read_retrospectives(directory: Path) -> list[RunRetrospective]:
    """The retrospectives in ``directory``, oldest first (unreadable ones skipped)."""
    found: list[RunRetrospective] = []
    if not directory.is_dir():
        return found
    for path in directory.glob("*.json"):
        try:
            found.append(RunRetrospective.model_validate(json.loads(path.read_bytes())))
        except (OSError, ValueError, ValidationError):
            continue
    return sorted(found, key=lambda r: (r.generated_at, r.run_id))


def latest_retrospective(project_dir: Path) -> RunRetrospective | None:
    found = read_retrospectives(project_dir / ".pact" / "retrospectives")
    return found[-1] if found else None
