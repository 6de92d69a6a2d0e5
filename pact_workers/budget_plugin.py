"""The harness's check of performance budgets, as a pytest plugin run in the sandbox.

The harness (``pact_workers.verify``) copies this file into the verification
workspace as ``pact_budget_plugin.py``, with ``pact_budgets.json`` (the budgets of
the contract) and ``tests/pact_budget_test.py`` (one test per budget), and loads it
with ``-p pact_budget_plugin``. It imports only the standard library and pytest.

How a budget is measured:

1. Before collection, each budgeted function of the component's module (a function,
   a method ``Class.method``, or a class, whose construction is timed) is wrapped so
   that the contract tests' successful calls record their arguments (deep copies, up
   to :data:`MAX_ARGUMENT_SETS`).
2. The budget tests run after every contract test. They put the original functions
   back and replay the recorded calls: first :data:`WARMUP_CALLS` warm-up calls
   (imports, caches and the interpreter's specialisation settle), then enough timed
   calls to fill about :data:`TARGET_S` seconds (between :data:`MIN_SAMPLES` and
   :data:`MAX_SAMPLES`), with the garbage collector paused as ``timeit`` does. The
   p95 is the nearest-rank 95th percentile. Timing stops early once more than 5% of
   the planned calls were over the budget, since the p95 can then only be over it.
3. ``max_memory_mb`` is the peak of memory allocated through Python's allocator
   during one call (``tracemalloc``), over the recorded argument sets. Memory a C
   extension allocates outside Python's allocator is not counted.

A budgeted function the contract tests never call successfully cannot be measured:
its budget test fails and says so.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import importlib
import inspect
import json
import math
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SPEC_FILE = "pact_budgets.json"
TEST_FILE = "pact_budget_test.py"
MAX_ARGUMENT_SETS = 16
WARMUP_CALLS = 10
TARGET_S = 1.0
MIN_SAMPLES = 20
MAX_SAMPLES = 400

Call = tuple[tuple[Any, ...], dict[str, Any]]

_module_name = ""
_recorded: dict[str, list[Call]] = {}
_originals: dict[str, Callable[..., Any]] = {}
_problems: dict[str, str] = {}
_restore: list[Callable[[], None]] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    global _module_name
    spec = json.loads(Path(__file__).with_name(SPEC_FILE).read_text())
    _module_name = spec["module"]
    try:
        module = importlib.import_module(_module_name)
    except Exception as exc:  # the contract tests report the import error themselves
        for name in spec["functions"]:
            _problems[name] = f"module {_module_name!r} cannot be imported: {exc!r}"
        return
    for name in spec["functions"]:
        try:
            _install(module, name)
        except (AttributeError, TypeError) as exc:
            _problems[name] = str(exc)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Budget tests last: they replay the calls the contract tests made."""
    items.sort(key=lambda item: item.path.name == TEST_FILE)


def _install(module: Any, name: str) -> None:
    *outer, attr = name.split(".")
    owner = module
    for part in outer:
        owner = getattr(owner, part)
    raw = inspect.getattr_static(owner, attr)
    if inspect.isclass(raw):
        _install_constructor(raw, name)
        return
    wrapper_type: Callable[[Any], Any] = lambda f: f  # noqa: E731
    function = raw
    if isinstance(raw, staticmethod | classmethod):
        wrapper_type = type(raw)
        function = raw.__func__
    if not callable(function):
        raise TypeError(f"{_module_name}.{name} is not a function, method or class")
    _originals[name] = function
    setattr(owner, attr, wrapper_type(_recorder(name, function)))
    _restore.append(lambda: setattr(owner, attr, raw))


def _install_constructor(cls: type, name: str) -> None:
    """A class's budget is its construction: record ``__init__``'s arguments."""
    init = cls.__dict__.get("__init__")
    inherited: Callable[..., None] = cls.__init__  # type: ignore[misc]

    def record_init(self: Any, *args: Any, **kwargs: Any) -> None:
        snapshot = _snapshot(name, args, kwargs)
        inherited(self, *args, **kwargs)
        _keep(name, snapshot)

    _originals[name] = cls
    cls.__init__ = record_init  # type: ignore[misc]
    if init is None:
        _restore.append(lambda: delattr(cls, "__init__"))
    else:
        _restore.append(lambda: setattr(cls, "__init__", init))


def _recorder(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(function):

        async def record_async(*args: Any, **kwargs: Any) -> Any:
            snapshot = _snapshot(name, args, kwargs)
            result = await function(*args, **kwargs)
            _keep(name, snapshot)
            return result

        return record_async

    def record(*args: Any, **kwargs: Any) -> Any:
        snapshot = _snapshot(name, args, kwargs)
        result = function(*args, **kwargs)
        _keep(name, snapshot)
        return result

    return record


def _snapshot(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call | None:
    if len(_recorded.get(name, ())) >= MAX_ARGUMENT_SETS:
        return None
    return _fresh((args, kwargs))


def _keep(name: str, snapshot: Call | None) -> None:
    if snapshot is not None and len(_recorded.setdefault(name, [])) < MAX_ARGUMENT_SETS:
        _recorded[name].append(snapshot)


def _fresh(call: Call) -> Call:
    """A deep copy, so that a call that mutates its arguments cannot change the next."""
    try:
        return copy.deepcopy(call)
    except Exception:  # uncopyable arguments (locks, sockets) are reused as they are
        return call


def _prepare(name: str) -> tuple[Callable[[Call], Any], list[Call]]:
    while _restore:
        _restore.pop()()
    if name in _problems:
        pytest.fail(f"the budget of {_module_name}.{name} cannot be measured: {_problems[name]}")
    calls = _recorded.get(name, [])
    if not calls:
        pytest.fail(
            f"the budget of {_module_name}.{name} cannot be measured: the contract tests "
            "never called it successfully (the harness times the calls the tests make)"
        )
    target = _originals[name]
    if inspect.iscoroutinefunction(target):
        loop = asyncio.new_event_loop()
        return (lambda call: loop.run_until_complete(target(*call[0], **call[1]))), calls
    return (lambda call: target(*call[0], **call[1])), calls


def check_latency(name: str, budget_ms: int) -> None:
    """Fail unless the p95 latency of ``name`` over the recorded calls is within budget."""
    run, calls = _prepare(name)
    budget_s = budget_ms / 1000.0
    warm: list[float] = []
    for i in range(max(WARMUP_CALLS, len(calls))):
        warm.append(_timed(run, _fresh(calls[i % len(calls)])))
    typical = sorted(warm)[len(warm) // 2]
    planned = max(MIN_SAMPLES, min(MAX_SAMPLES, int(TARGET_S / max(typical, 1e-7))))
    allowed_over = planned - math.ceil(0.95 * planned)
    samples: list[float] = []
    over = 0
    gc.collect()
    gc.disable()
    try:
        for i in range(planned):
            took = _timed(run, _fresh(calls[i % len(calls)]))
            samples.append(took)
            over += took > budget_s
            if over > allowed_over:
                break
    finally:
        gc.enable()
    p95 = sorted(samples)[math.ceil(0.95 * len(samples)) - 1]
    if p95 > budget_s:
        early = (
            f" (stopped early: {over} of {planned} planned calls were already over the budget)"
            if len(samples) < planned
            else ""
        )
        pytest.fail(
            f"p95 latency of {_module_name}.{name} is {p95 * 1000:.2f} ms, over its budget "
            f"of {budget_ms} ms (p95_latency_ms): {len(samples)} timed calls after "
            f"{len(warm)} warm-up calls, replaying the {len(calls)} argument sets the "
            f"contract tests called it with{early}",
            pytrace=False,
        )


def check_memory(name: str, budget_mb: int) -> None:
    """Fail unless no recorded call of ``name`` allocates more than ``budget_mb`` at peak."""
    run, calls = _prepare(name)
    peak = 0
    tracemalloc.start()
    try:
        for call in calls:
            fresh = _fresh(call)
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            run(fresh)
            peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()
    if peak > budget_mb * 1024 * 1024:
        pytest.fail(
            f"peak memory of {_module_name}.{name} is {peak / 1024 / 1024:.1f} MB, over "
            f"its budget of {budget_mb} MB (max_memory_mb; Python allocations measured "
            f"with tracemalloc over the {len(calls)} argument sets the contract tests used)",
            pytrace=False,
        )


def _timed(run: Callable[[Call], Any], call: Call) -> float:
    start = time.perf_counter()
    run(call)
    return time.perf_counter() - start
