"""What the Docker sandbox contains: network, processes, memory, time, the filesystem.

Each test attacks the sandbox the way a broken or hostile implementation could and
checks that the attack fails, the run ends, and no container is left behind.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pact_workers.errors import ArtifactError
from pact_workers.sandbox import SandboxRequest, SandboxResult
from pact_workers.sandbox.docker import LABEL, LABEL_VALUE, DockerSandbox
from pact_workers.verify import run_contract_tests
from tests.conftest import DOCKER_GROUP
from tests.integration.test_sandbox_contract import DOCKER_ENV, docker_leftovers, docker_sandbox

pytestmark = [pytest.mark.docker, DOCKER_GROUP]


@pytest.fixture(scope="module")
def engine() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


@pytest.fixture
def client(engine: tuple[Any, DockerSandbox]) -> Iterator[Any]:
    docker_client, _ = engine
    yield docker_client
    assert docker_leftovers(docker_client) == [], "a sandbox container was left behind"


@pytest.fixture
def sandbox(engine: tuple[Any, DockerSandbox], client: Any) -> DockerSandbox:
    return engine[1]


def run(sandbox: DockerSandbox, code: str, **kw: Any) -> SandboxResult:
    return sandbox.run(
        SandboxRequest(command=["{python}", "-c", code], environment=DOCKER_ENV, **kw)
    )


def _bridge_gateway(client: Any) -> str:
    """The host's address on docker0, as containers on the default bridge see it."""
    config = client.networks.get("bridge").attrs["IPAM"]["Config"]
    return str(config[0].get("Gateway") or "172.17.0.1")


@pytest.fixture
def host_listener(client: Any) -> Iterator[tuple[str, int]]:
    """A TCP server on the host's docker0 address that accepts (and drops) connections."""
    host = _bridge_gateway(client)
    server = socket.create_server((host, 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield host, server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def test_a_network_call_from_a_verification_fails(
    sandbox: DockerSandbox, host_listener: tuple[str, int]
) -> None:
    host, port = host_listener
    tests = f"""\
import socket

import pytest


@pytest.mark.parametrize("address", [("1.1.1.1", 53), ("{host}", {port})])
def test_connect(address):
    with socket.create_connection(address, timeout=3):
        pass
""".encode()
    results, _ = run_contract_tests(
        sandbox,
        implementation={"src/nothing.py": b""},
        tests={"tests/test_net.py": tests},
        environment=DOCKER_ENV,
        timeout_s=60,
    )
    assert (results.total, results.failed) == (2, 2)
    assert all("unreachable" in f.error_message.lower() for f in results.failure_details), [
        f.error_message for f in results.failure_details
    ]
    # The control: the same connection with the network on reaches the host, so the
    # failures above are the sandbox's doing.
    allowed = run(
        sandbox,
        f"import socket; socket.create_connection(({host!r}, {port}), timeout=5).close()",
        network=True,
    )
    assert allowed.exit_code == 0, allowed.stderr


def test_a_fork_bomb_is_stopped_by_the_pids_limit(sandbox: DockerSandbox, client: Any) -> None:
    code = (
        "import os, sys\n"
        "said = False\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError as exc:\n"
        "        if not said:\n"
        "            print('fork failed:', exc.strerror, flush=True)\n"
        "            said = True\n"
    )
    started = time.monotonic()
    res = run(sandbox, code, max_pids=32, timeout_s=4, max_memory_mb=256)
    assert time.monotonic() - started < 30
    assert res.timed_out
    assert "fork failed" in res.stdout
    # The host still forks.
    assert subprocess.run(["true"], check=False).returncode == 0


def test_a_memory_hog_is_killed_and_reported_as_out_of_memory(sandbox: DockerSandbox) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))\n"
    res = run(sandbox, code, max_memory_mb=64, timeout_s=60)
    assert res.oom_killed and not res.timed_out
    assert res.exit_code != 0
    assert "killed: out of memory (limit 64 MB)" in res.stderr


def test_an_endless_loop_is_killed_at_the_timeout(sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    res = run(sandbox, "while True:\n    pass\n", timeout_s=1.0)
    elapsed = time.monotonic() - started
    assert res.timed_out and res.exit_code < 0
    assert 1.0 <= res.duration_s < 10 and elapsed < 20


def test_writing_outside_the_workspace_fails(sandbox: DockerSandbox) -> None:
    code = (
        "import errno\n"
        "for path in ['/etc/pact', '/usr/pact', '/pact', '/usr/lib/python3/pact.py',\n"
        "             '/workspace/../root-escape']:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print(path, 'WRITTEN')\n"
        "    except OSError as exc:\n"
        "        print(path, errno.errorcode[exc.errno])\n"
        "open('/workspace/ok', 'w').write('x')\n"
        "open('/tmp/ok', 'w').write('x')\n"
        "print('workspace and tmp ok')\n"
    )
    res = run(sandbox, code)
    assert res.exit_code == 0, res.stderr
    assert "WRITTEN" not in res.stdout
    assert res.stdout.count("EROFS") + res.stdout.count("EACCES") == 5
    assert "workspace and tmp ok" in res.stdout


@pytest.mark.parametrize(
    ("code", "collect"),
    [
        ("pass", ["../x"]),
        ("pass", ["/etc/passwd"]),
        ("import os; os.symlink('/etc/passwd', 'report.xml')", ["report.xml"]),
        ("import os; os.makedirs('out'); os.symlink('/etc', 'out/etc')", ["out"]),
        ("import os; os.symlink('/etc', 'conf')", ["conf/passwd"]),
        ("import os; os.mkfifo('pipe')", ["pipe"]),
    ],
)
def test_an_output_path_that_escapes_the_workspace_is_rejected(
    sandbox: DockerSandbox, code: str, collect: list[str]
) -> None:
    with pytest.raises(ArtifactError):
        run(sandbox, code, collect=collect)


def test_outputs_over_the_cap_are_rejected(sandbox: DockerSandbox) -> None:
    code = "open('big.bin', 'wb').write(b'x' * 200_000)"
    with pytest.raises(ArtifactError, match="cap"):
        run(sandbox, code, collect=["big.bin"], max_collect_bytes=100_000)


def test_no_container_remains_after_a_hundred_runs(sandbox: DockerSandbox, client: Any) -> None:
    def one(i: int) -> SandboxResult:
        if i % 10 == 0:  # every tenth is killed at its timeout
            return run(sandbox, "import time; time.sleep(30)", timeout_s=0.5)
        return run(sandbox, f"print({i})", files={"in.txt": b"x"}, collect=["in.txt"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, range(100)))
    assert sum(r.timed_out for r in results) == 10
    assert all(r.exit_code == 0 for i, r in enumerate(results) if i % 10)
    label = f"{LABEL}={LABEL_VALUE}"
    assert client.containers.list(all=True, filters={"label": label}) == []
    assert client.volumes.list(filters={"label": label}) == []
