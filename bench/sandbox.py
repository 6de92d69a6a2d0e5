"""The cost of one verification in the Docker sandbox, against plain ``docker`` and local.

One verification = the harness's real command (``python3 -m pytest -q -p
no:cacheprovider --junitxml=... tests`` with PYTHONPATH=src) over a 5-test contract
suite and its implementation, the JUnit report brought back and parsed. Measured
four ways, alternating within each round so that load from elsewhere hits all alike:

- ``docker_sandbox``: ``run_contract_tests(DockerSandbox)`` — every limit on (no
  network, CPU, memory, pids, read-only root, dropped capabilities, init), files in
  and out through the API archives, the container and its volume removed.
- ``docker_cp`` (the baseline of the target): the same command in the same image with
  the plain CLI, files moved the same way (through the engine, no shared volume):
  ``docker create`` + ``docker cp`` (inputs) + ``docker start -a`` + ``docker cp``
  (the report) + ``docker rm -v``; no limits.
- ``docker_bind``: ``docker run --rm -v <tmp>:/workspace`` — a bind mount, the
  cheapest plain way, but one the sandbox does not allow (host and sandbox share a
  directory); shown for reference.
- ``local``: ``run_contract_tests(LocalSandbox)`` with this interpreter.

Target: docker_sandbox median <= 1.5 x docker_cp median.

Usage: python bench/sandbox.py [--runs 15] [--json] [--check]
Needs a Docker engine and the sandbox base image (sandbox_images/build-base.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pact_workers.models import EnvironmentSpec  # noqa: E402
from pact_workers.sandbox import LocalSandbox  # noqa: E402
from pact_workers.sandbox.base import Sandbox  # noqa: E402
from pact_workers.sandbox.docker import DockerSandbox  # noqa: E402
from pact_workers.verify import parse_junit, run_contract_tests  # noqa: E402

TARGET_RATIO = 1.5
DOCKER_ENV = EnvironmentSpec(python_path="python3", required_tools=["pytest"])
LOCAL_ENV = EnvironmentSpec(python_path=sys.executable, required_tools=[])

TESTS = {
    "tests/test_calc.py": b"""\
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
}
IMPLEMENTATION = {
    "src/calc.py": b"""\
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b
"""
}
REPORT = "report.xml"
PYTEST = [
    "python3",
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    f"--junitxml={REPORT}",
    "-o",
    "junit_family=xunit1",
    "tests",
]
ENV_ARGS = ["-e", "PYTHONPATH=/workspace/src", "-e", "PYTHONDONTWRITEBYTECODE=1"]


def sh(*argv: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(argv, input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def write_tree(root: Path) -> None:
    for rel, data in {**IMPLEMENTATION, **TESTS}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def verify_in(sandbox: Sandbox, env: EnvironmentSpec) -> int:
    results, _ = run_contract_tests(
        sandbox, implementation=IMPLEMENTATION, tests=TESTS, environment=env, timeout_s=120
    )
    return results.passed


def docker_cp(image: str, inputs: Path) -> int:
    """create + cp in + start -a + cp out + rm: files through the engine, as the sandbox."""
    cid = sh("docker", "create", *ENV_ARGS, image, *PYTEST).decode().strip()
    try:
        sh("docker", "cp", f"{inputs}/.", f"{cid}:/workspace")
        sh("docker", "start", "-a", cid)
        tar = sh("docker", "cp", f"{cid}:/workspace/{REPORT}", "-")
    finally:
        sh("docker", "rm", "-f", "-v", cid)
    return _passed_from_tar(tar)


def docker_bind(image: str, inputs: Path) -> int:
    """docker run --rm with the inputs bind-mounted (a directory shared with the host)."""
    with tempfile.TemporaryDirectory(prefix="pact-bench-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(inputs, work)
        os.chmod(work, 0o777)  # the image runs as uid 10001
        sh("docker", "run", "--rm", "-v", f"{work}:/workspace", *ENV_ARGS, image, *PYTEST)
        return parse_junit((work / REPORT).read_bytes()).passed


def _passed_from_tar(tar: bytes) -> int:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        member = archive.extractfile(REPORT)
        assert member is not None
        return parse_junit(member.read()).passed


def measure(runs: int) -> dict[str, Any]:
    with DockerSandbox.from_env() as sandbox, tempfile.TemporaryDirectory() as tmp:
        image = sandbox.image_for(DOCKER_ENV.model_copy(update={"env_vars": {}}))
        # The harness adds PYTHONDONTWRITEBYTECODE; build that spec's image up front.
        verify_in(sandbox, DOCKER_ENV)
        inputs = Path(tmp) / "inputs"
        write_tree(inputs)
        local = LocalSandbox()
        variants: dict[str, Callable[[], int]] = {
            "docker_sandbox": lambda: verify_in(sandbox, DOCKER_ENV),
            "docker_cp": lambda: docker_cp(image, inputs),
            "docker_bind": lambda: docker_bind(image, inputs),
            "local": lambda: verify_in(local, LOCAL_ENV),
        }
        for run in variants.values():  # warm up: image, tool check, page cache
            assert run() == 5
        times: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for i in range(runs):
            # Rotate the order so that no variant always runs right after another.
            for name in names[i % len(names) :] + names[: i % len(names)]:
                started = time.perf_counter()
                passed = variants[name]()
                times[name].append(time.perf_counter() - started)
                assert passed == 5, f"{name}: {passed} of 5 tests passed"
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["docker_sandbox"] / medians["docker_cp"]
    return {
        "runs": runs,
        "median_s": {k: round(v, 4) for k, v in medians.items()},
        "min_s": {k: round(min(v), 4) for k, v in times.items()},
        "sandbox_over_docker_cp": round(ratio, 3),
        "sandbox_over_docker_bind": round(medians["docker_sandbox"] / medians["docker_bind"], 3),
        "sandbox_over_local": round(medians["docker_sandbox"] / medians["local"], 3),
        "target_met": ratio <= TARGET_RATIO,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each variant")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target fails")
    args = parser.parse_args(argv)
    result = measure(args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"one verification (5 tests), median of {args.runs} runs each, alternating")
        print(f"{'variant':16} {'median s':>9} {'min s':>9}")
        for name, median in result["median_s"].items():
            print(f"{name:16} {median:9.3f} {result['min_s'][name]:9.3f}")
        print(f"docker_sandbox / docker_cp   {result['sandbox_over_docker_cp']:.2f}")
        print(f"docker_sandbox / docker_bind {result['sandbox_over_docker_bind']:.2f}")
        print(f"docker_sandbox / local       {result['sandbox_over_local']:.2f}")
        verdict = "met" if result["target_met"] else "NOT met"
        print(f"target (docker_sandbox <= {TARGET_RATIO}x docker_cp): {verdict}")
    return 1 if args.check and not result["target_met"] else 0


if __name__ == "__main__":
    sys.exit(main())
