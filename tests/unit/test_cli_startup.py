"""What ``pact`` loads before it runs a command: not the run loop, not redis-py.

Each check runs in a fresh interpreter, since this process has imported everything
already. Module sets, not times: a slow machine must not fail them.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import scheduler

ROOT = Path(__file__).resolve().parents[2]


def heavy_modules_after(statement: str, heavy: tuple[str, ...] = ("redis", "scheduler.run")) -> str:
    """redis-py's modules and the run loop (or the modules ``heavy`` and theirs), as a
    fresh interpreter holds them after ``statement``."""
    code = (
        f"import sys; {statement}; print(sorted(m for m in sys.modules "
        f"if any(m == h or m.startswith(h + '.') for h in {heavy!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_importing_the_cli_loads_neither_the_run_loop_nor_redis() -> None:
    assert heavy_modules_after("import scheduler.cli") == "[]"


def test_the_embedded_run_loop_imports_without_redis() -> None:
    """Only a fleet run talks to Redis, but the run loop reaches the gates' fleet
    module (review decisions sent over Redis) for embedded runs too."""
    assert heavy_modules_after("import scheduler.run") == "['scheduler.run']"


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("ComponentState", "scheduler.wavefront"),
        ("RunController", "scheduler.run"),
        ("RunState", "scheduler.state"),
        ("RunStatus", "scheduler.state"),
        ("SchedulingMode", "scheduler.wavefront"),
        ("Settings", "scheduler.settings"),
        ("WavefrontScheduler", "scheduler.wavefront"),
        ("fold", "scheduler.fold"),
        ("load_settings", "scheduler.settings"),
        ("load_state", "scheduler.launch"),
        ("start_run", "scheduler.launch"),
    ],
)
def test_every_public_name_of_the_scheduler_package_is_the_one_its_module_defines(
    name: str, module: str
) -> None:
    """Loaded on first use, and ``fold`` the function, not its module, although
    ``scheduler.fold`` has been imported."""
    defined = getattr(importlib.import_module(module), name)
    assert getattr(scheduler, name) is defined
    assert name in scheduler.__all__ and name in dir(scheduler)


def test_a_name_the_scheduler_package_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = scheduler.no_such_name


def test_pact_status_loads_neither_the_run_loop_nor_redis(tmp_path: Path) -> None:
    """The commands package loads a command's module when the CLI calls it: reading a
    run's state (here, of a directory with no run) needs neither."""
    argv = ["pact", "status", str(tmp_path), "--json"]
    statement = (
        f"from scheduler.cli import main; sys.argv = {argv!r}; "
        "exec('try:\\n main()\\nexcept SystemExit:\\n pass')"
    )
    assert heavy_modules_after(statement) == "[]"


def test_every_function_of_the_commands_package_is_the_one_its_module_defines() -> None:
    from scheduler import commands

    for name in commands.__all__:
        module = importlib.import_module(commands._SUBMODULES[name])
        assert getattr(commands, name) is getattr(module, name), name
    assert sorted(commands.__all__) == sorted(commands._SUBMODULES)
    with pytest.raises(AttributeError, match="no_such_command"):
        _ = commands.no_such_command


def test_the_fleet_key_names_import_without_redis() -> None:
    assert heavy_modules_after("from pact_workers.fleet import keys") == "[]"


def test_the_lifecycle_package_loads_its_machine_on_first_use() -> None:
    """The machine imports ``scheduler.events``, which imports the lifecycle's events:
    a package that imported its machine made every import order but one fail."""
    machine = ("scheduler.lifecycle.machine",)
    assert heavy_modules_after("import scheduler.lifecycle.events", machine) == "[]"
    assert heavy_modules_after("import scheduler.events", machine) == "[]"
    used = "import scheduler.lifecycle as l; l.check"
    assert heavy_modules_after(used, machine) == "['scheduler.lifecycle.machine']"


@pytest.mark.parametrize(
    ("package", "names"),
    [("scheduler.lifecycle", "_SUBMODULES"), ("pact_workers.fleet", "_SUBMODULES")],
)
def test_every_public_name_of_a_lazy_package_is_the_one_its_module_defines(
    package: str, names: str
) -> None:
    loaded = importlib.import_module(package)
    where = getattr(loaded, names)
    for name, module in where.items():
        assert getattr(loaded, name) is getattr(importlib.import_module(module), name), name
        assert name in loaded.__all__ and name in dir(loaded)
    assert sorted(set(loaded.__all__) - {"keys"}) == sorted(where)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = loaded.no_such_name


def test_pact_help_lists_a_runs_life_first_and_the_fleet_last() -> None:
    import typer

    from scheduler.cli import app

    names = list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert names[:5] == ["run", "status", "resume", "rebuild", "demo"]
    assert names.index("doctor") < names.index("worker") < names.index("scheduler")
