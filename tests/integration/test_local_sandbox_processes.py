"""The local sandbox leaves no process behind: not in the background, not daemonised.

Every process a test starts carries a random token in its argv, so what is left is
counted in /proc rather than read from a log.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from pact_workers.models import EnvironmentSpec
from pact_workers.sandbox import LocalSandbox, SandboxRequest, SandboxResult, local, reaper

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the reaper needs Linux subreapers and /proc"
)

ENV = EnvironmentSpec(python_path=sys.executable, required_tools=[])

#: Leaves three processes behind the ways real code does, waits until all three
#: run, prints how many it sees, then exits ("exit") or waits for its timeout ("hang").
DAEMONISE = b"""\
import os, shutil, subprocess, sys, time

marker, mode = sys.argv[1], sys.argv[2]
sleeper = os.path.abspath("sleep-" + marker)
os.symlink(shutil.which("sleep"), sleeper)

# A shell's `setsid sleep 300 &`: a session of its own, and its parent gone at once.
subprocess.run(["sh", "-c", "setsid " + sleeper + " 300 &"], check=True)

# A classic daemon: fork, setsid, fork again, and the middle process exits.
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sleeper, [sleeper, "301"])
    os._exit(0)
os.wait()

# A child that ignores SIGTERM, left in the command's process group.
stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
subprocess.Popen([sys.executable, "-c", stubborn, "stubborn-" + marker])


def running():
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/" + name + "/cmdline", "rb") as fh:
                argv = fh.read().decode().split("\\0")
        except OSError:
            continue
        count += argv[0].endswith("sleep-" + marker) or "stubborn-" + marker in argv
    return count


deadline = time.monotonic() + 20
while running() < 3 and time.monotonic() < deadline:
    time.sleep(0.02)
print(running(), flush=True)
if mode == "hang":
    time.sleep(300)
"""


def marked(token: str) -> list[int]:
    """Live processes with ``token`` in their argv (a zombie's argv is empty)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


@pytest.fixture
def token() -> Iterator[str]:
    token = f"pact-leak-{secrets.token_hex(6)}"
    yield token
    # A failing run must not leave its processes to the tests that follow.
    for pid in marked(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_daemonising(marker: str, mode: str) -> SandboxResult:
    request = SandboxRequest(
        command=["{python}", "daemonise.py", marker, mode],
        files={"daemonise.py": DAEMONISE},
        environment=ENV,
        timeout_s=4.0 if mode == "hang" else 60.0,
    )
    return LocalSandbox().run(request)


def test_no_process_a_command_daemonised_outlives_its_run(token: str) -> None:
    assert marked(token) == []
    runs = [(f"{token}-{i}", "hang" if i % 2 else "exit") for i in range(20)]
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        results = list(pool.map(lambda run: run_daemonising(*run), runs))
    for (marker, mode), result in zip(runs, results, strict=True):
        # All three were running when the command ended: they had something to outlive.
        assert result.stdout.split() == ["3"], (marker, result.stderr)
        assert result.timed_out is (mode == "hang")
        assert result.exit_code == (-signal.SIGKILL if mode == "hang" else 0)
    assert marked(token) == []


def test_a_command_that_kills_the_reaper_still_does_not_outlive_the_run(token: str) -> None:
    code = (
        "import os, signal, sys, time\n"
        "with open(f'/proc/{os.getppid()}/cmdline', 'rb') as fh:\n"
        "    if b'reaper.py' not in fh.read():\n"
        "        sys.exit(3)  # not under the reaper: the parent is the caller itself\n"
        "os.kill(os.getppid(), signal.SIGKILL)\n"
        "time.sleep(300)\n"
    )
    request = SandboxRequest(command=["{python}", "-c", code, token], environment=ENV)
    started = time.monotonic()
    result = LocalSandbox().run(request)
    assert time.monotonic() - started < 30
    assert result.exit_code == -signal.SIGKILL and not result.timed_out
    assert marked(token) == []


def test_a_reaper_that_does_not_report_in_time_goes_with_its_session(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hard deadline two seconds after the start, long before the reaper's own timeout.
    monkeypatch.setattr(local, "REAPER_GRACE_S", -58.0)
    code = "import time; print('started', flush=True); time.sleep(300)"
    request = SandboxRequest(command=["{python}", "-c", code, token], environment=ENV, timeout_s=60)
    result = LocalSandbox().run(request)
    assert result.timed_out and result.exit_code == -signal.SIGKILL
    assert result.stdout == "started\n"
    assert marked(token) == []


def test_a_reaper_told_to_stop_kills_the_command_and_everything_it_daemonised(
    token: str,
) -> None:
    """What the sandbox does when the program running it is interrupted."""
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]],\n"
        "                 start_new_session=True)\n"
        "print('started', flush=True)\n"
        "time.sleep(300)\n"
    )
    read_fd, write_fd = os.pipe()
    argv = reaper.command_line(
        [sys.executable, "-c", code, token], status_fd=write_fd, timeout_s=60, env=os.environ
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, pass_fds=(write_fd,))
    os.close(write_fd)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"
        assert len(marked(token)) == 3  # the reaper, the command and its daemon
        proc.terminate()
        assert proc.wait(timeout=30) == 128 + signal.SIGKILL
        with os.fdopen(read_fd, "rb") as report:
            assert reaper.parse_report(report.read()) == (-signal.SIGKILL, False, 0)
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    assert marked(token) == []
