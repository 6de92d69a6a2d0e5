#!/usr/bin/env python3
"""A command-line coding agent for tests: a real process that reads its workspace.

It behaves as a CLI agent run by the ``command`` backend does: it reads ``prompt.md``
and the input files in its workspace and writes its answer as files. Its "knowledge"
of the solutions is a directory laid out like a replay directory
(``<knowledge>/<component>/{interface.json,tests/,src/}``), shipped into the
workspace with the agent's ``files_dir``; everything else it must find out from its
workspace:

- the component from the prompt (the attempt's part starts ``# Component <id>``), the
  role from its instructions ("You are the contract author" / "test author" / "code
  author" / "integrator"), checked against ``inputs/spec/component.json``;
- a contract author is given the contracts of the component's dependencies, which must
  be the ones its knowledge holds;
- every other role is given the component's contract, which must be the one its
  knowledge holds (at ``interface.json`` and ``inputs/contract/interface.json``);
- asked for a teachback first (the gates), it writes only ``teachback.json`` from its
  knowledge (the one ``attempts/teachback-1`` holds until a rejection came back); the
  auditor writes ``audit.json``;
- a code author or integrator refuses to work when its workspace holds test files, and
  needs the source of every dependency its contract names under
  ``inputs/deps_src/src/``.

Every Python file it writes starts with a comment that records where it ran
(``network=on`` when the sandbox has a network interface besides loopback, and the
workspace directory), so a test can tell that the file came from this agent, in which
sandbox. ``--probe-network`` makes the test author add a test that fails when the
verification sandbox has a network.

Exit status: 0 answered, 2 bad usage, 3 refused (the reason on stderr).
Standard library only: it runs with the sandbox image's own python3.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

ROLES = {
    "contract author": "contract_author",
    "test author": "test_author",
    "code author": "code_author",
    "integrator": "integrator",
    "auditor": "auditor",
}
#: The heading of the section that asks for a teachback before the work (the gates).
TEACHBACK_HEADING = "## First, a teachback"
EVIDENCE_PREFIX = "# written by fake_coding_agent:"
PROBE_TEST = "tests/network_probe_test.py"
PROBE_SOURCE = '''"""Added by fake_coding_agent: contract tests must run without network."""

import os


def test_the_verification_sandbox_has_no_network():
    interfaces = sorted(set(os.listdir("/sys/class/net")) - {"lo"})
    assert interfaces == [], f"network interfaces while verifying: {interfaces}"
'''


class Refusal(Exception):
    """The agent cannot answer this request (exit status 3)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", default="prompt.md", help="the prompt file")
    parser.add_argument("--workspace", default=".", help="the workspace directory")
    parser.add_argument("--knowledge", required=True, help="replay-style solutions directory")
    parser.add_argument("--probe-network", action="store_true", help="add a no-network test")
    args = parser.parse_args(argv)
    try:
        os.chdir(args.workspace)
        written = answer(Path(args.prompt), Path(args.knowledge), probe=args.probe_network)
    except Refusal as exc:
        print(f"fake_coding_agent: refused: {exc}", file=sys.stderr)
        return 3
    print(f"fake_coding_agent: wrote {', '.join(written)}")
    return 0


def answer(prompt_path: Path, knowledge: Path, *, probe: bool = False) -> list[str]:
    """Read the workspace, write the role's files; return what was written."""
    if not prompt_path.is_file():
        raise Refusal(f"no prompt at {prompt_path}")
    prompt = prompt_path.read_text(encoding="utf-8")
    component, role = read_prompt(prompt)
    spec = read_json(Path("inputs/spec/component.json"))
    if spec.get("component_id") != component:
        raise Refusal(
            f"the prompt is about {component!r} but inputs/spec/component.json is about "
            f"{spec.get('component_id')!r}"
        )
    known = knowledge / component
    if not (known / "interface.json").is_file():
        raise Refusal(f"no knowledge of component {component!r} under {knowledge}")
    if role == "contract_author":
        check_dependency_contracts(spec, knowledge)
        return write_tree(known / "interface.json", Path("interface.json"), role, component)
    contract = check_contract(known)
    if TEACHBACK_HEADING in prompt:
        # Restate first: the corrected teachback once one was sent back, else the one a
        # replay script serves first (it may omit something), else the component's.
        first = known / "attempts" / "teachback-1" / "teachback.json"
        corrected = "teachback rejected" in prompt or not first.is_file()
        source = known / "teachback.json" if corrected else first
        shutil.copyfile(source, "teachback.json")
        return ["teachback.json"]
    if role == "auditor":
        shutil.copyfile(known / "audit.json", "audit.json")
        return ["audit.json"]
    if role == "test_author":
        written = write_tree(known / "tests", Path("tests"), role, component)
        if probe:
            Path(PROBE_TEST).write_text(PROBE_SOURCE, encoding="utf-8")
            written.append(PROBE_TEST)
        return written
    check_no_tests(knowledge)
    check_dependency_sources(contract)
    return write_tree(known / "src", Path("src"), role, component)


def read_prompt(prompt: str) -> tuple[str, str]:
    match = re.search(r"^# Component (\S+)\s*$", prompt, re.MULTILINE)
    if match is None:
        raise Refusal("the prompt names no component (no '# Component <id>' line)")
    roles = {value for key, value in ROLES.items() if re.search(rf"You are the {key}\b", prompt)}
    if len(roles) != 1:
        raise Refusal(f"cannot tell the role from the prompt (found {sorted(roles) or 'none'})")
    return match.group(1), roles.pop()


def read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Refusal(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise Refusal(f"{path} is not a JSON object")
    return data


def check_contract(known: Path) -> dict[str, object]:
    """The contract in the workspace must be the one this agent knows."""
    expected = read_json(known / "interface.json")
    for path in (Path("interface.json"), Path("inputs/contract/interface.json")):
        if read_json(path) != expected:
            raise Refusal(f"{path} is not the contract I know for {expected['component_id']!r}")
    return expected


def check_dependency_contracts(spec: dict[str, object], knowledge: Path) -> None:
    for dep in _names(spec.get("dependencies")):
        if not (knowledge / dep / "interface.json").is_file():
            continue  # external: nothing to compare with
        given = Path("inputs/dep_contracts") / dep / "interface.json"
        if not given.is_file():
            raise Refusal(f"the contract of dependency {dep!r} is missing ({given})")
        if read_json(given) != read_json(knowledge / dep / "interface.json"):
            raise Refusal(f"{given} is not the contract I know for {dep!r}")


def check_dependency_sources(contract: dict[str, object]) -> None:
    for dep in _names(contract.get("dependencies")):
        source = Path("inputs/deps_src/src") / f"{dep}.py"
        if not source.is_file():
            raise Refusal(f"the source of dependency {dep!r} is missing ({source})")


def check_no_tests(knowledge: Path) -> None:
    """A code author or integrator must never be shown the contract tests."""
    own = {Path(__file__).resolve(), knowledge.resolve()}
    found = []
    for path in sorted(Path(".").rglob("*")):
        resolved = path.resolve()
        if resolved in own or any(parent in own for parent in resolved.parents):
            continue
        name = path.name
        if path.is_file() and (
            "tests" in path.parts[:-1]
            or name == "conftest.py"
            or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))
        ):
            found.append(path.as_posix())
    if found:
        raise Refusal(f"my workspace holds test files, which a code author must not see: {found}")


def write_tree(source: Path, target: Path, role: str, component: str) -> list[str]:
    """Copy ``source`` (a file or a directory) to ``target``, marking Python files."""
    pairs = (
        [(source, target)]
        if source.is_file()
        else [
            (path, target / path.relative_to(source))
            for path in sorted(source.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts
        ]
    )
    if not pairs:
        raise Refusal(f"my knowledge has nothing at {source}")
    mark = f"{EVIDENCE_PREFIX} role={role} component={component} {where_am_i()}\n"
    for src, dst in pairs:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.suffix == ".py":
            dst.write_text(mark + src.read_text(encoding="utf-8"), encoding="utf-8")
        else:
            shutil.copyfile(src, dst)
    return [dst.as_posix() for _, dst in pairs]


def where_am_i() -> str:
    """``network=on|off|unknown workspace=<cwd>``: what a test can check afterwards."""
    try:
        interfaces = set(os.listdir("/sys/class/net")) - {"lo"}
        network = "on" if interfaces else "off"
    except OSError:
        network = "unknown"
    return f"network={network} workspace={os.getcwd()}"


def _names(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


if __name__ == "__main__":
    sys.exit(main())
