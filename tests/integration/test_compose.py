"""The whole fleet as compose.yaml deploys it: images, health, a run, Flower, clean-up.

Needs a Docker engine, a Compose binary (``docker compose`` or docker-compose), the
sandbox base image and a Redis image (``pact-redis:bookworm`` from
``sandbox_images/build-base.sh --redis``, or ``redis:7``); ``scripts/ensure-services``
provides them as root. The fleet image is (re)built with the deploy scripts when it is
missing or was built from other sources than the checkout's (its
``pact-fleet.source-digest`` label). The stack runs under a project name of its own,
with Flower and the metrics on free loopback ports, and is torn down (``down -v``)
whatever happens; then nothing of it may remain: no container, volume or network of
the project, and no sandbox container started by its workers.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DOCKER_GROUP, REPO, require_service

pytestmark = [pytest.mark.slow, pytest.mark.docker, DOCKER_GROUP]

FLEET_IMAGE = "pact-fleet:latest"
BUILD_IMAGE = REPO / "deploy" / "build-image.sh"
COMPOSE_FILE = REPO / "compose.yaml"
DOCKER_SOCKET = Path("/var/run/docker.sock")
#: The image's unprivileged user; workers get the socket's group (as deploy/compose.sh).
FLEET_UID = 10010
BROKER = "redis://redis:6379/0"
SCHEDULERS = {"scheduler", "scheduler-2"}
SERVICES = {
    "redis",
    *SCHEDULERS,
    "worker-contract",
    "worker-test",
    "worker-code",
    "worker-integrator",
    "worker-auditor",
    "flower",
}
ROLES = {"pact.contract_author", "pact.test_author", "pact.code_author", "pact.integrator"}
SANDBOX_LABEL = "pact-fleet=sandbox"
SANDBOX_OWNER_LABEL = "pact-fleet.owner"

BUILD_TIMEOUT_S = 900
UP_TIMEOUT_S = 300
HEALTHY_TIMEOUT_S = 240
RUN_TIMEOUT_S = 600
DOWN_TIMEOUT_S = 180


def sh(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; with ``check``, fail the test with its output if it exits non-zero."""
    proc = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=REPO,
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"{' '.join(argv)} exited with {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        )
    return proc


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def source_digest() -> str:
    """What deploy/build-image.sh labels the image with: sha256 over the ``sha256sum``
    lines of the packages' files and pyproject.toml, sorted by path."""
    paths = [REPO / "pyproject.toml"]
    for top in ("pact_workers", "scheduler"):
        paths += [
            p
            for p in (REPO / top).rglob("*")
            if p.is_file()
            and not p.is_symlink()
            and "__pycache__" not in p.parts
            and p.suffix != ".pyc"
        ]
    rels = sorted((p.relative_to(REPO).as_posix() for p in paths), key=str.encode)
    lines = "".join(f"{hashlib.sha256((REPO / r).read_bytes()).hexdigest()}  {r}\n" for r in rels)
    return hashlib.sha256(lines.encode()).hexdigest()


def image_label(image: str, label: str) -> str | None:
    """The label's value, "" when the image lacks it, None when there is no such image."""
    template = f'{{{{index .Config.Labels "{label}"}}}}'
    proc = sh(
        ["docker", "image", "inspect", "--format", template, image], timeout_s=60, check=False
    )
    if proc.returncode != 0:
        return None
    value = proc.stdout.strip()
    return "" if value == "<no value>" else value


def has_image(image: str) -> bool:
    return image_label(image, "pact-fleet.image") is not None


# -- what the test needs, or skip (fail under PACT_REQUIRE_SERVICES=1) -----------------------


def compose_binary() -> list[str]:
    if shutil.which("docker") is None:
        require_service("docker", "the docker CLI is not installed")
    if sh(["docker", "info"], timeout_s=60, check=False).returncode != 0:
        require_service("docker", "the Docker engine does not answer (`docker info` failed)")
    if sh(["docker", "compose", "version"], timeout_s=60, check=False).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose") is None:
        require_service(
            "docker-compose",
            "neither `docker compose` nor docker-compose is installed "
            "(apt-get install docker-compose; scripts/ensure-services does as root)",
        )
    return ["docker-compose"]


def redis_image() -> str:
    """The local debootstrap Redis image, else the public one (pulled if need be)."""
    chosen = os.environ.get("PACT_REDIS_IMAGE")
    if chosen:
        return chosen
    if has_image("pact-redis:bookworm"):
        return "pact-redis:bookworm"
    if has_image("redis:7"):
        return "redis:7"
    if sh(["docker", "pull", "redis:7"], timeout_s=300, check=False).returncode != 0:
        require_service(
            "docker",
            "no Redis image: redis:7 cannot be pulled and pact-redis:bookworm is missing "
            "(build it as root: sandbox_images/build-base.sh --redis)",
        )
    return "redis:7"


def sandbox_base_image() -> str:
    base = os.environ.get("PACT_SANDBOX_BASE_IMAGE") or "pact-sandbox-base:bookworm"
    if not has_image(base):
        require_service(
            "docker",
            f"the sandbox base image {base} is missing "
            "(build it as root: sandbox_images/build-base.sh)",
        )
    return base


def fleet_image() -> float:
    """Make sure pact-fleet:latest is built from this checkout; seconds spent building."""
    digest = source_digest()
    if image_label(FLEET_IMAGE, "pact-fleet.source-digest") == digest:
        return 0.0
    started = time.monotonic()
    proc = sh(
        ["sh", str(BUILD_IMAGE)],
        timeout_s=BUILD_TIMEOUT_S,
        env={**os.environ, "PYTHON": sys.executable},
        check=False,
    )
    if proc.returncode != 0:
        require_service("docker", f"deploy/build-image.sh failed:\n{proc.stderr[-3000:]}")
    print("", *(ln for ln in proc.stderr.splitlines() if ln.startswith("build-")), sep="\n")
    return time.monotonic() - started


def worker_user() -> str:
    """As deploy/compose.sh: the unprivileged user with the socket's group, when the
    socket is group-writable; else root."""
    try:
        st = DOCKER_SOCKET.stat()
    except OSError:
        return "root"
    if stat.S_ISSOCK(st.st_mode) and st.st_mode & stat.S_IWGRP:
        return f"{FLEET_UID}:{st.st_gid}"
    return "root"


# -- the stack -------------------------------------------------------------------------------


@dataclass
class Stack:
    """One compose project of compose.yaml."""

    compose: list[str]
    project: str
    env: dict[str, str]
    flower_port: int
    metrics_port: int
    flower_auth: tuple[str, str]
    hostnames: set[str] = field(default_factory=set)

    def run(
        self, *args: str, timeout_s: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [*self.compose, "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        return sh(argv, timeout_s=timeout_s, env=self.env, check=check)

    def exec(self, service: str, *argv: str, timeout_s: float = 120) -> str:
        return self.run("exec", "-T", service, *argv, timeout_s=timeout_s).stdout

    def containers(self) -> list[str]:
        """Every container of the project, running or not, by the label Compose sets."""
        proc = sh(
            [
                "docker",
                "ps",
                "--all",
                "--quiet",
                "--no-trunc",
                "--filter",
                f"label=com.docker.compose.project={self.project}",
            ],
            timeout_s=60,
        )
        return proc.stdout.split()

    def inspect(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        docs: list[dict[str, Any]] = json.loads(
            sh(["docker", "inspect", *ids], timeout_s=60).stdout
        )
        return docs

    def remember_hostnames(self) -> None:
        """The containers' hostnames: the owner labels of the sandboxes they start."""
        for doc in self.inspect(self.containers()):
            self.hostnames.add(str(doc["Config"]["Hostname"]))

    def logs(self) -> str:
        proc = self.run("logs", "--no-color", "--tail=40", timeout_s=120, check=False)
        return proc.stdout[-8000:] + proc.stderr[-2000:]

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = {}
            for doc in self.inspect(self.containers()):
                service = doc["Config"]["Labels"].get("com.docker.compose.service", "?")
                health = (doc["State"].get("Health") or {}).get("Status", "no healthcheck")
                states[service] = f"{doc['State']['Status']}/{health}"
            if set(states) == SERVICES and all(s == "running/healthy" for s in states.values()):
                return
            time.sleep(1)
        pytest.fail(f"not healthy within {timeout_s:.0f} s: {states}\n{self.logs()}")

    def runs(self) -> list[dict[str, Any]]:
        out = self.exec("scheduler", "pact", "runs", "--broker", BROKER, "--json")
        entries: list[dict[str, Any]] = json.loads(out)
        return entries

    def sandboxes(self) -> list[str]:
        """Sandbox containers started by this project's workers (owner ``host:pid``)."""
        proc = sh(
            [
                "docker",
                "ps",
                "--all",
                "--filter",
                f"label={SANDBOX_LABEL}",
                "--format",
                f'{{{{.ID}}}} {{{{.Label "{SANDBOX_OWNER_LABEL}"}}}}',
            ],
            timeout_s=60,
        )
        mine = []
        for line in proc.stdout.splitlines():
            cid, _, owner = line.partition(" ")
            if owner.rpartition(":")[0] in self.hostnames:
                mine.append(cid)
        return mine

    def leftovers(self) -> dict[str, list[str]]:
        """Whatever of the project still exists after ``down -v``."""
        found: dict[str, list[str]] = {}
        by_label = f"label=com.docker.compose.project={self.project}"
        found["containers"] = self.containers()
        by_name = sh(
            ["docker", "ps", "--all", "--format", "{{.Names}}", "--filter", f"name={self.project}"],
            timeout_s=60,
        ).stdout.split()
        found["containers named after the project"] = by_name
        for kind in ("volume", "network"):
            found[f"{kind}s"] = sh(
                ["docker", kind, "ls", "--quiet", "--filter", by_label], timeout_s=60
            ).stdout.split()
        found["sandbox containers"] = self.sandboxes()
        return {what: items for what, items in found.items() if items}

    def force_remove(self, leftovers: dict[str, list[str]]) -> None:
        containers = {c for what, items in leftovers.items() if "container" in what for c in items}
        if containers:
            sh(["docker", "rm", "--force", "--volumes", *containers], timeout_s=120, check=False)
        for kind in ("volume", "network"):
            if leftovers.get(f"{kind}s"):
                sh(["docker", kind, "rm", *leftovers[f"{kind}s"]], timeout_s=120, check=False)


@contextlib.contextmanager
def stack_cleanup(stack: Stack) -> Iterator[None]:
    """``down -v`` in every case; then nothing of the project may remain (asserted only
    when the body succeeded, so that its own failure is the one reported)."""
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        with contextlib.suppress(Exception):
            stack.remember_hostnames()
        started = time.monotonic()
        down = stack.run(
            "down", "--volumes", "--remove-orphans", "--timeout", "30",
            timeout_s=DOWN_TIMEOUT_S, check=False,
        )  # fmt: skip
        print(f"down: {time.monotonic() - started:.1f} s")
        leftovers = stack.leftovers()
        stack.force_remove(leftovers)
        if not failed:
            assert down.returncode == 0, f"down failed:\n{down.stdout}\n{down.stderr}"
            assert not leftovers, f"left behind after `down -v`: {leftovers}"


def http_get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


# -- the test --------------------------------------------------------------------------------


@pytest.mark.timeout(BUILD_TIMEOUT_S + UP_TIMEOUT_S + HEALTHY_TIMEOUT_S + RUN_TIMEOUT_S + 300)
def test_compose_fleet_runs_the_example_with_docker_sandboxes() -> None:
    compose = compose_binary()
    redis = redis_image()
    sandbox_base = sandbox_base_image()
    build_s = fleet_image()

    auth = ("ops", secrets.token_urlsafe(16))
    flower_port, metrics_port = free_port(), free_port()
    stack = Stack(
        compose=compose,
        project=f"pact-test-{secrets.token_hex(4)}",
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")},
            "PACT_FLEET_IMAGE": FLEET_IMAGE,
            "PACT_REDIS_IMAGE": redis,
            "PACT_SANDBOX_BASE_IMAGE": sandbox_base,
            "PACT_WORKER_USER": worker_user(),
            "FLOWER_USER": auth[0],
            "FLOWER_PASSWORD": auth[1],
            "FLOWER_PORT": str(flower_port),
            "PACT_METRICS_PORT": str(metrics_port),
        },
        flower_port=flower_port,
        metrics_port=metrics_port,
        flower_auth=auth,
    )
    timings = {"image build": build_s}

    with stack_cleanup(stack):
        started = time.monotonic()
        stack.run("up", "-d", timeout_s=UP_TIMEOUT_S)
        timings["up -d"] = time.monotonic() - started
        stack.remember_hostnames()
        stack.wait_healthy(HEALTHY_TIMEOUT_S)
        timings["up to healthy"] = time.monotonic() - started

        # Every worker runs as the user chosen for it, with the socket mounted; the two
        # schedulers' hostnames begin their ids.
        scheduler_hosts = set()
        for doc in stack.inspect(stack.containers()):
            service = doc["Config"]["Labels"]["com.docker.compose.service"]
            if service in SCHEDULERS:
                scheduler_hosts.add(str(doc["Config"]["Hostname"]))
            assert doc["Config"]["Labels"].get("pact-fleet.compose") == "1", service
            assert doc["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped", service
            if service.startswith("worker-"):
                assert doc["Config"]["User"] == stack.env["PACT_WORKER_USER"], service

        example = stack.exec(
            "scheduler",
            "python3",
            "-c",
            "import scheduler, pathlib; "
            "print(pathlib.Path(scheduler.__file__).parent / 'examples/calculator')",
        ).strip()
        started = time.monotonic()
        out = stack.exec(
            "scheduler",
            "pact",
            "submit",
            f"{example}/tree.json",
            "--broker",
            BROKER,
            "--replay-dir",
            f"{example}/replay",
            "--sandbox",
            "docker",
        )
        assert "queued as run " in out, out
        run_id = out.split("queued as run ", 1)[1].split()[0]

        entry: dict[str, Any] = {}
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            entry = next((e for e in stack.runs() if e["run_id"] == run_id), {})
            if entry.get("state") in {"completed", "failed", "paused"}:
                break
            time.sleep(1)
        timings["example run"] = time.monotonic() - started
        assert entry.get("state") == "completed", f"{entry}\n{stack.logs()}"
        assert entry["items_done"] == entry["items_total"] > 0, entry
        # One of the two schedulers drove it (a scheduler id is host:pid:suffix).
        assert len(scheduler_hosts) == 2
        assert str(entry["owner"]).split(":")[0] in scheduler_hosts, entry

        # Flower: closed without credentials, and it saw the run's tasks on every role.
        flower = f"http://127.0.0.1:{stack.flower_port}"
        status, _ = http_get(f"{flower}/api/tasks")
        assert status == 401
        status, body = http_get(f"{flower}/api/tasks", auth=stack.flower_auth)
        assert status == 200, body[:500]
        tasks: dict[str, dict[str, Any]] = json.loads(body)
        ours = {tid: t for tid, t in tasks.items() if tid.startswith(f"{run_id}.")}
        assert {t["name"] for t in ours.values()} == ROLES, ours
        assert all(t["state"] == "SUCCESS" for t in ours.values()), ours

        # The scheduler's metrics are served on the published (loopback) port.
        status, body = http_get(f"http://127.0.0.1:{stack.metrics_port}/metrics")
        assert status == 200
        assert b"pact_" in body

        # Nothing the run started is still there (each sandbox is removed after use).
        stack.remember_hostnames()
        assert stack.sandboxes() == []

    for what, seconds in timings.items():
        print(f"{what}: {seconds:.1f} s")
