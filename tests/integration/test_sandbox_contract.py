"""One contract suite for every sandbox: the same tests on the local and the Docker sandbox.

The Docker sandbox needs an engine and the sandbox base image. When the base image is
missing and this machine can build it (root, debootstrap), ``sandbox_images/build-base.sh``
builds it once; otherwise the Docker cases skip (or fail under PACT_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pact_workers.errors import ArtifactError, EnvironmentSpecError, SandboxError
from pact_workers.models import EnvironmentSpec
from pact_workers.sandbox import LocalSandbox, SandboxRequest, SandboxResult
from pact_workers.sandbox.base import Sandbox
from pact_workers.sandbox.docker import (
    LABEL_OWNER,
    DockerSandbox,
    SandboxUnavailable,
    connect_from_env,
)
from pact_workers.sandbox.images import DEFAULT_BASE, default_base_image
from pact_workers.verify import run_contract_tests
from tests.conftest import DOCKER_GROUP, REPO, require_service

pytestmark = DOCKER_GROUP

#: The environment inside the sandbox image: its own python3, with pytest.
DOCKER_ENV = EnvironmentSpec(python_path="python3", required_tools=["pytest"])
LOCAL_ENV = EnvironmentSpec(python_path=sys.executable, required_tools=[])
BUILD_BASE = REPO / "sandbox_images" / "build-base.sh"
BUILD_BASE_TIMEOUT_S = 900


# -- the Docker engine (shared with test_docker_containment) -------------------------------


@contextlib.contextmanager
def docker_sandbox() -> Iterator[tuple[Any, DockerSandbox]]:
    """A docker client and a DockerSandbox on it with the sandbox image built, or skip."""
    try:
        client = connect_from_env(timeout_s=120)
    except ImportError:
        require_service("docker", "docker-py is not installed (pip install 'docker>=7')")
    except SandboxUnavailable as exc:
        require_service("docker", str(exc))
    try:
        _ensure_base_image(client)
        sandbox = DockerSandbox(client)
        try:
            sandbox.image_for(DOCKER_ENV)
        except SandboxError as exc:
            require_service("docker", f"the sandbox image cannot be built: {exc}")
        yield client, sandbox
    finally:
        client.close()


def _ensure_base_image(client: Any) -> None:
    """Build the debootstrap base image once when it is missing and this machine can."""
    import docker  # type: ignore[import-untyped]

    base = default_base_image()
    try:
        client.images.get(base)
        return
    except docker.errors.ImageNotFound:
        if base != DEFAULT_BASE:
            return  # a registry image: the build pulls it (or says why it cannot)
    if os.geteuid() != 0 or shutil.which("debootstrap", path="/usr/sbin:/sbin:/usr/bin") is None:
        require_service(
            "docker",
            f"the sandbox base image {base} is missing and only root with debootstrap "
            "can build it: run sandbox_images/build-base.sh",
        )
    proc = subprocess.run(
        ["sh", str(BUILD_BASE)],
        capture_output=True,
        text=True,
        timeout=BUILD_BASE_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        require_service("docker", f"build-base.sh failed: {proc.stderr.strip()[-1000:]}")


@pytest.fixture(scope="session")
def docker_session() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


# -- the subject: one sandbox and what suits it ----------------------------------------------


@dataclass
class Subject:
    """A sandbox under test, the environment that suits it, and how to see its leftovers."""

    sandbox: Sandbox
    env: EnvironmentSpec
    #: Asserts that nothing a run started is still alive; gets the run's stdout.
    assert_nothing_left: Callable[[str], None]

    def run(self, code: str, **kw: Any) -> SandboxResult:
        request = SandboxRequest(command=["{python}", "-c", code], environment=self.env, **kw)
        return self.sandbox.run(request)


def _local_nothing_left(stdout: str) -> None:
    child = int(stdout.split()[0])
    assert not _alive(child), f"pid {child} outlived its sandbox"


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for its reaper."""
    for _ in range(50):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


def docker_leftovers(client: Any) -> list[Any]:
    """Containers this process started that still exist."""
    owner = f"{LABEL_OWNER}={_owner()}"
    found: list[Any] = client.containers.list(all=True, filters={"label": owner})
    return found


def _owner() -> str:
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


@pytest.fixture(params=["local", "docker"])
def subject(request: pytest.FixtureRequest) -> Subject:
    if request.param == "local":
        return Subject(LocalSandbox(), LOCAL_ENV, _local_nothing_left)
    client, sandbox = request.getfixturevalue("docker_session")

    def nothing_left(_stdout: str) -> None:
        assert docker_leftovers(client) == []

    return Subject(sandbox, DOCKER_ENV, nothing_left)


# -- the contract ----------------------------------------------------------------------------


def test_files_go_in_and_requested_files_come_back(subject: Subject) -> None:
    code = "open('out/b.txt','w').write(open('in/a.txt').read().upper())"
    res = subject.run(
        code,
        files={"in/a.txt": b"hello", "out/.keep": b"", "out/deep/c.bin": b"\x00\xff"},
        collect=["out", "in/a.txt"],
    )
    assert res.exit_code == 0, res.stderr
    assert res.files == {
        "out/b.txt": b"HELLO",
        "out/.keep": b"",
        "out/deep/c.bin": b"\x00\xff",
        "in/a.txt": b"hello",
    }


def test_an_output_that_does_not_exist_is_simply_absent(subject: Subject) -> None:
    res = subject.run("pass", collect=["nothing/here", "nor-here.txt"])
    assert res.exit_code == 0 and res.files == {}


def test_each_run_gets_a_fresh_workspace(subject: Subject) -> None:
    first = subject.run("open('marker','w').write('x')")
    second = subject.run("import os; print(os.path.exists('marker'))")
    assert first.exit_code == 0, first.stderr
    assert second.stdout.strip() == "False"


def test_environment_comes_from_the_spec(subject: Subject) -> None:
    env = subject.env.model_copy(update={"env_vars": {"X_FLAG": "7"}})
    request = SandboxRequest(
        command=[
            "{python}",
            "-c",
            "import os, mod; print(os.environ['X_FLAG'], os.environ['PYTHONPATH'], mod.VALUE)",
        ],
        files={"src/mod.py": b"VALUE = 3\n"},
        environment=env,
        pythonpath=["src"],
    )
    res = subject.sandbox.run(request)
    assert res.exit_code == 0, res.stderr
    flag, path, value = res.stdout.split()
    assert (flag, value) == ("7", "3") and path.endswith("/workspace/src")


def test_a_missing_required_tool_is_reported_before_any_work(subject: Subject) -> None:
    env = subject.env.model_copy(update={"required_tools": ["pytest-nonexistent-tool"]})
    with pytest.raises(EnvironmentSpecError, match="pytest-nonexistent-tool"):
        subject.sandbox.run(SandboxRequest(command=["{python}", "-c", "pass"], environment=env))


def test_path_comes_from_the_spec(subject: Subject) -> None:
    env = subject.env.model_copy(
        update={"inherit_path": False, "extra_path_dirs": ["/opt/tools"], "required_tools": []}
    )
    request = SandboxRequest(
        command=["{python}", "-c", "import os; print(os.environ['PATH'])"], environment=env
    )
    res = subject.sandbox.run(request)
    assert res.stdout.strip() == "/opt/tools:/usr/bin"


def test_a_command_that_cannot_be_started_is_a_sandbox_error(subject: Subject) -> None:
    request = SandboxRequest(command=["no-such-command-here"], environment=subject.env)
    with pytest.raises(SandboxError, match="no-such-command-here"):
        subject.sandbox.run(request)


def test_a_command_killed_by_a_signal_reports_minus_the_signal(subject: Subject) -> None:
    res = subject.run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert res.exit_code == -15 and not res.timed_out


def test_exit_code_and_both_streams_are_reported(subject: Subject) -> None:
    res = subject.run("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert not res.timed_out and not res.oom_killed and not res.output_truncated


def test_timeout_kills_the_whole_process_tree(subject: Subject) -> None:
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    res = subject.run(code, timeout_s=1.5)
    assert res.timed_out and res.exit_code < 0
    assert time.monotonic() - started < 30
    subject.assert_nothing_left(res.stdout)


def test_output_is_capped_keeping_the_tail(subject: Subject) -> None:
    code = "import sys; print('x' * 100000 + 'END'); print('y' * 50000 + 'TAIL', file=sys.stderr)"
    res = subject.run(code, max_output_bytes=1000)
    assert res.output_truncated
    assert len(res.stdout) < 1100 and res.stdout.rstrip().endswith("END")
    assert len(res.stderr) < 1100 and res.stderr.rstrip().endswith("TAIL")


def test_stdin_is_closed(subject: Subject) -> None:
    res = subject.run("import sys; print(repr(sys.stdin.read()))", timeout_s=20)
    assert res.stdout.strip() == "''"


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../x", "", "a\x00b"])
def test_paths_that_escape_the_workspace_are_rejected(subject: Subject, bad: str) -> None:
    with pytest.raises(ArtifactError):
        subject.run("pass", files={bad: b"x"})
    with pytest.raises(ArtifactError):
        subject.run("pass", collect=[bad])


def test_a_symlinked_output_is_rejected(subject: Subject) -> None:
    code = "import os; os.makedirs('out'); os.symlink('/etc/hostname', 'out/link')"
    with pytest.raises(ArtifactError, match="symlink"):
        subject.run(code, collect=["out"])


def test_an_output_under_a_symlinked_directory_is_rejected(subject: Subject) -> None:
    with pytest.raises(ArtifactError):
        subject.run("import os; os.symlink('/etc', 'conf')", collect=["conf/hostname"])


# -- a real verification ---------------------------------------------------------------------

CALC_TESTS = b"""\
import pytest

from calc import add, div, mul, sub


def test_add():
    assert add(2, 3) == 5


def test_sub():
    assert sub(5, 3) == 2


def test_mul():
    assert mul(4, 3) == 12


def test_div():
    assert div(9, 3) == 3


def test_div_by_zero():
    with pytest.raises(ZeroDivisionError):
        div(1, 0)
"""

CALC_RIGHT = b"""\
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b
"""

CALC_WRONG = CALC_RIGHT.replace(b"return a - b", b"return a + b").replace(
    b"return a / b", b"return a // b if b else 0"
)


def _verify(subject: Subject, implementation: bytes) -> dict[str, Any]:
    results, sandbox_result = run_contract_tests(
        subject.sandbox,
        implementation={"src/calc.py": implementation},
        tests={"tests/test_calc.py": CALC_TESTS},
        environment=subject.env,
        timeout_s=120,
    )
    assert not sandbox_result.timed_out
    # Everything but the wall-clock timestamp and pytest's own wording of the failure.
    return {
        "total": results.total,
        "passed": results.passed,
        "failed": results.failed,
        "errors": results.errors,
        "skipped": results.skipped,
        "failing": sorted(f.test_id for f in results.failure_details),
        "all_passed": results.all_passed,
    }


def test_a_verification_passes_a_correct_implementation(subject: Subject) -> None:
    assert _verify(subject, CALC_RIGHT) == {
        "total": 5,
        "passed": 5,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "failing": [],
        "all_passed": True,
    }


def test_a_verification_fails_a_wrong_implementation(subject: Subject) -> None:
    assert _verify(subject, CALC_WRONG) == {
        "total": 5,
        "passed": 3,
        "failed": 2,
        "errors": 0,
        "skipped": 0,
        # Pact's form of a test id: path::Class::test.
        "failing": ["tests/test_calc.py::test_div_by_zero", "tests/test_calc.py::test_sub"],
        "all_passed": False,
    }
