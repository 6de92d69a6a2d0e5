"""The local sandbox: fresh workspace, environment, timeout, files in and out."""

from __future__ import annotations

import sys
import time

import pytest

from pact_workers.errors import ArtifactError
from pact_workers.models import EnvironmentSpec
from pact_workers.sandbox import LocalSandbox, SandboxRequest, safe_relpath

ENV = EnvironmentSpec(python_path=sys.executable, required_tools=[])


def run(code: str, **kw: object) -> object:
    req = SandboxRequest(command=["{python}", "-c", code], environment=ENV, **kw)  # type: ignore[arg-type]
    return LocalSandbox().run(req)


def test_files_go_in_and_requested_files_come_back() -> None:
    code = "open('out/b.txt','w').write(open('in/a.txt').read().upper())"
    res = run(code, files={"in/a.txt": b"hello", "out/.keep": b""}, collect=["out"])
    assert res.exit_code == 0, res.stderr
    assert res.files["out/b.txt"] == b"HELLO"


def test_each_run_gets_a_fresh_workspace() -> None:
    first = run("import os; open('marker','w').write('x'); print(os.getcwd())")
    second = run("import os; print(os.path.exists('marker'), os.getcwd())")
    assert second.stdout.startswith("False")
    assert first.stdout.strip() != second.stdout.split()[1]


def test_environment_comes_from_the_spec() -> None:
    spec = EnvironmentSpec(python_path=sys.executable, required_tools=[], env_vars={"X_FLAG": "7"})
    req = SandboxRequest(
        command=[
            "{python}",
            "-c",
            "import os; print(os.environ['X_FLAG'], os.environ['PYTHONPATH'])",
        ],
        environment=spec,
        pythonpath=["src"],
    )
    res = LocalSandbox().run(req)
    flag, path = res.stdout.split()
    assert flag == "7" and path.endswith("/workspace/src")


def test_timeout_kills_the_whole_process_group() -> None:
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    res = run(code, timeout_s=1.0)
    assert res.timed_out
    assert time.monotonic() - started < 30
    child = int(res.stdout.split()[0])
    assert not _alive(child)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper needs Linux")
def test_a_process_in_a_session_of_its_own_does_not_outlive_a_run_that_exits() -> None:
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                         start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
    )
    res = run(code, timeout_s=30)
    assert res.exit_code == 0 and not res.timed_out
    assert not _alive(int(res.stdout.split()[0]))


def test_the_command_gets_exactly_the_environment_the_spec_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Under the C locale an interpreter between the sandbox and the command would add
    # LC_CTYPE (PEP 538 locale coercion); the command must not see it.
    for name in ("LANG", "LC_ALL", "LC_CTYPE"):
        monkeypatch.delenv(name, raising=False)
    req = SandboxRequest(command=["env", "-0"], environment=ENV)
    res = LocalSandbox().run(req)
    seen = dict(line.split("=", 1) for line in res.stdout.split("\0") if line)
    expected = ENV.build_env("")
    assert seen == expected


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


def test_output_is_capped() -> None:
    res = run("print('x' * 100000)", max_output_bytes=1000)
    assert res.output_truncated and len(res.stdout) < 1100


def test_stdin_is_closed() -> None:
    res = run("import sys; print(repr(sys.stdin.read()))", timeout_s=10)
    assert res.stdout.strip() == "''"


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../x", "", "a\x00b"])
def test_paths_that_escape_the_workspace_are_rejected(bad: str) -> None:
    with pytest.raises(ArtifactError):
        safe_relpath(bad)
    with pytest.raises(ArtifactError):
        run("pass", files={bad: b"x"})


def test_symlinked_output_is_rejected() -> None:
    code = "import os; os.makedirs('out'); os.symlink('/etc/hostname', 'out/link')"
    with pytest.raises(ArtifactError, match="symlink"):
        run(code, collect=["out"])


def test_collect_path_that_escapes_is_rejected() -> None:
    with pytest.raises(ArtifactError):
        run("pass", collect=["../"])
