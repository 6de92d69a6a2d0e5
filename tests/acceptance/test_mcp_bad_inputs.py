"""Bad input through ``pact mcp``, driven by the MCP SDK's own stdio client: every
refusal is a tool error (or a resource error) that names the argument, file or component
and what was wrong, as the CLI's refusal of the same input does; nothing is written and
the server goes on serving.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra pact-fleet[mcp]")

from mcp.client import Client

from tests.acceptance.test_mcp_server import server, text_of, with_client
from tests.acceptance.test_provenance_cli import pact
from tests.conftest import DATA

CONTRACTS = DATA / "bad_inputs" / "contracts"
#: What pydantic's own report of a validation error looks like (never shown to a client).
PYDANTIC = ("errors.pydantic.dev", "validation error for", "input_value=")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("mcp-bad") / "demo"
    assert pact("demo", str(project)).returncode == 0
    return project


def refused(result: Any, *words: str) -> str:
    """The text of a tool error, after checking it names every one of ``words``."""
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert result.is_error, text
    for word in words:
        assert word in text, f"{word!r} not in {text!r}"
    assert not any(noise in text for noise in PYDANTIC), text
    assert "Traceback" not in text, text
    return text


def dead_broker() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def test_an_argument_a_tool_does_not_take_or_of_the_wrong_type_is_refused_naming_it(
    demo: Path,
) -> None:
    async def talk(client: Client) -> dict[str, Any]:
        calls: dict[str, tuple[str, dict[str, Any]]] = {
            "validate_path": ("pact_validate", {"path": "/etc"}),
            "status_extra": ("pact_status", {"verbose": True}),
            "resume_phase_number": ("pact_resume", {"confirm": True, "from_phase": 5}),
            "resume_confirm_word": ("pact_resume", {"confirm": "yes"}),
            "resume_confirm_list": ("pact_resume", {"confirm": [True]}),
            "submit_trees_string": ("pact_submit", {"trees": 7}),
            "submit_missing_trees": ("pact_submit", {"confirm": True}),
        }
        found = {key: await client.call_tool(name, args) for key, (name, args) in calls.items()}
        found["status"] = await client.call_tool("pact_status", {})
        return found

    before = (demo / ".pact" / "audit.jsonl").read_bytes()
    found = with_client(server("--project", str(demo)), talk)
    # Not silently dropped: a client that asked to validate /etc is told it cannot.
    refused(found["validate_path"], "pact_validate", "'path'", "takes no arguments")
    refused(found["status_extra"], "pact_status", "'verbose'")
    refused(found["resume_phase_number"], "pact_resume", "from_phase", "string")
    refused(found["resume_confirm_word"], "pact_resume", "confirm", "boolean")
    refused(found["resume_confirm_list"], "pact_resume", "confirm", "boolean")
    refused(found["submit_trees_string"], "pact_submit", "trees", "list")
    refused(found["submit_missing_trees"], "pact_submit", "trees", "required")
    assert not found["status"].is_error  # and the server goes on serving
    assert (demo / ".pact" / "audit.jsonl").read_bytes() == before


def test_submit_refuses_no_trees_empty_paths_nul_bytes_and_numbers_that_are_not_numbers(
    example: Path,
) -> None:
    tree = str(example / "tree.json")
    replay = str(example / "replay")
    go = {"confirm": True, "replay_dir": replay}

    async def talk(client: Client) -> dict[str, Any]:
        calls: dict[str, dict[str, Any]] = {
            "no_trees": {"trees": [], **go},
            "empty_path": {"trees": [tree, ""], **go},
            "nul_byte": {"trees": ["a\x00b.json"], **go},
            "priority_text": {"trees": [tree], "priority": "3", **go},
            "priority_yes": {"trees": [tree], "priority": True, **go},
            "empty_replay_dir": {"trees": [tree], "confirm": True, "replay_dir": ""},
            "nul_replay_dir": {"trees": [tree], "confirm": True, "replay_dir": "r\x00"},
            "priority_10": {"trees": [tree], "priority": 10, **go},
            "no_replay_dir": {"trees": [tree], "confirm": True},
        }
        return {key: await client.call_tool("pact_submit", args) for key, args in calls.items()}

    found = with_client(server("--broker", dead_broker()), talk)
    refused(found["no_trees"], "trees", "at least 1")
    refused(found["empty_path"], "trees[1]", "empty")
    refused(found["nul_byte"], "trees[0]", "NUL")
    refused(found["priority_text"], "priority", "integer")
    refused(found["priority_yes"], "priority", "integer")
    refused(found["empty_replay_dir"], "replay_dir", "empty")
    refused(found["nul_replay_dir"], "replay_dir", "NUL")
    # Named as the client spells them, not as the command line does (--priority, --replay-dir).
    refused(found["priority_10"], "priority", "less than or equal to 9")
    refused(found["no_replay_dir"], "replay_dir", "replay agent")
    for key in ("priority_10", "no_replay_dir"):
        assert "--" not in found[key].content[0].text, found[key].content[0].text


def test_a_huge_argument_is_refused_at_once_without_being_echoed(demo: Path) -> None:
    huge = "x" * (4 << 20)

    async def talk(client: Client) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, name, args in (
            ("phase", "pact_resume", {"confirm": True, "from_phase": huge}),
            ("tree", "pact_submit", {"trees": [huge], "confirm": True}),
            ("agent", "pact_submit", {"trees": ["t.json"], "agent": huge}),
        ):
            started = time.monotonic()
            found[key] = await client.call_tool(name, args)
            found[f"{key}_s"] = time.monotonic() - started
        return found

    found = with_client(server("--project", str(demo)), talk)
    for key, field in (("phase", "from_phase"), ("tree", "trees.0"), ("agent", "agent")):
        text = refused(found[key], field, "at most")
        assert len(text) < 1000, text[:200]
        # Formatting a 4 MB value into the server's log held up every session for 19 s.
        assert found[f"{key}_s"] < 5, found[f"{key}_s"]


@pytest.fixture(scope="module")
def broken_contracts(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo run with contracts the CLI's validate refuses, and a FIFO for one."""
    project = tmp_path_factory.mktemp("mcp-contracts") / "run"
    shutil.copytree(demo, project)
    contracts = project / ".pact" / "contracts"
    for case in ("invalid_json", "misplaced"):
        (contracts / case).mkdir()
        shutil.copyfile(
            CONTRACTS / case / "lexer" / "interface.json", contracts / case / "interface.json"
        )
    lexer = json.loads((contracts / "lexer" / "interface.json").read_text())
    (contracts / "huge_number").mkdir()
    (contracts / "huge_number" / "interface.json").write_text(
        json.dumps({**lexer, "component_id": "huge_number"})[:-1]
        + ', "version": '
        + "9" * 5000
        + "}"
    )
    (contracts / "fifo").mkdir()
    os.mkfifo(contracts / "fifo" / "interface.json")  # no writer: reading it waits forever
    return project


def test_contract_resources_read_contracts_as_pact_validate_does(broken_contracts: Path) -> None:
    async def talk(client: Client) -> dict[str, str]:
        found: dict[str, str] = {}
        for name in ("invalid_json", "misplaced", "huge_number", "fifo", "lexer"):
            try:
                found[name] = "OK " + text_of(await client.read_resource(f"pact://contract/{name}"))
            except Exception as exc:  # the SDK raises the server's error
                found[name] = str(exc)
        try:
            found["all"] = "OK " + text_of(await client.read_resource("pact://contracts"))
        except Exception as exc:
            found["all"] = str(exc)
        validated = await client.call_tool("pact_validate", {})
        found["validate"] = "".join(getattr(p, "text", "") for p in validated.content)
        return found

    async def main() -> dict[str, str]:
        # A short timeout: the FIFO hung the read (the test fails instead of hanging).
        async with Client(server("--project", str(broken_contracts)), read_timeout_seconds=20) as c:
            return await talk(c)

    found = anyio.run(main)
    assert "invalid_json/interface.json" in found["invalid_json"]
    assert "invalid JSON" in found["invalid_json"] and "line 3" in found["invalid_json"]
    assert "'parser'" in found["misplaced"] and "directory of 'misplaced'" in found["misplaced"]
    assert "more than 4300 digits" in found["huge_number"]
    assert "fifo/interface.json" in found["fifo"] and "not a regular file" in found["fifo"]
    for name in ("invalid_json", "misplaced", "huge_number", "fifo"):
        assert not any(noise in found[name] for noise in PYDANTIC), found[name]
    assert found["lexer"].startswith("OK ")  # a good contract beside bad ones is served
    # pact://contracts refuses with pact validate's own message for the first bad one.
    cli = pact("validate", str(broken_contracts))
    assert cli.returncode == 2
    first = " ".join(cli.stderr.split()).removeprefix("error: ")
    assert first in found["all"] and first in found["validate"]


def test_concurrent_resumes_of_one_run_drive_it_once_and_write_one_resume(
    example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "failed"
    project.mkdir()
    (project / "pact.yaml").write_text("max_attempts: 1\n")
    failed = pact(
        "run", str(example / "tree.json"), "--project", str(project),
        "--replay-dir", str(example / "replay"),
    )  # fmt: skip
    assert failed.returncode == 1

    async def talk(client: Client) -> list[Any]:
        results: list[Any] = []

        async def resume() -> None:
            results.append(await client.call_tool("pact_resume", {"confirm": True}))

        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(resume)
        return results

    results = with_client(server("--project", str(project)), talk)
    done = [r for r in results if not r.is_error]
    assert len(done) == 1 and json.loads(done[0].content[0].text)["status"] == "completed"
    for result in results:
        if result.is_error:
            refused(result, str(project), "already resuming", "pact://status")
    log = (project / ".pact" / "audit.jsonl").read_text().splitlines()
    assert (
        sum('"type": "run_resumed"' in line or '"type":"run_resumed"' in line for line in log) == 1
    )


def test_budget_with_an_unreadable_pact_yaml_shows_the_spend_and_says_why(
    demo: Path, tmp_path: Path
) -> None:
    project = tmp_path / "run"
    shutil.copytree(demo, project)
    (project / "pact.yaml").mkdir()  # as `pact status` does: a warning, not a refusal

    async def talk(client: Client) -> Any:
        return json.loads(text_of(await client.read_resource("pact://budget")))

    budget = with_client(server("--project", str(project)), talk)
    cli = json.loads(pact("status", str(demo), "--json").stdout)
    assert budget["spent_usd"] == pytest.approx(cli["usage"]["cost_usd"])
    assert budget["budget_usd"] is None and set(budget["phases"]) >= {"contract", "implement"}
    [warning] = budget["warnings"]
    assert "pact.yaml" in warning and "is a directory" in warning


def test_a_project_that_is_a_file_is_refused_at_start(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("a file, not a directory\n")
    started = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "mcp", "--project", str(afile)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert started.returncode == 2
    message = " ".join(started.stderr.split())
    assert "afile" in message and "is not a directory" in message, message
    assert "Traceback" not in started.stderr
