"""``pact mcp`` with a real MCP client: the SDK's own stdio client drives the server in a
subprocess; the HTTP transport refuses requests without the bearer token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra pact-fleet[mcp]")

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.acceptance.test_provenance_cli import pact

T = TypeVar("T")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("mcp") / "demo"
    assert pact("demo", str(project)).returncode == 0
    return project


def server(*args: str, cwd: Path | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "scheduler.cli", "mcp", *args],
        env={k: v for k, v in os.environ.items() if k.startswith(("PACT_", "PYTHON", "PATH"))},
        cwd=str(cwd) if cwd else os.getcwd(),
    )


def with_client(params: StdioServerParameters, talk: Callable[[Client], Awaitable[T]]) -> T:
    async def main() -> T:
        async with Client(params, read_timeout_seconds=60) as client:
            return await talk(client)

    return anyio.run(main)


def text_of(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.contents)


def text_of_call(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def test_a_client_lists_reads_validates_and_is_refused_an_unconfirmed_resume(
    demo: Path,
) -> None:
    async def talk(client: Client) -> dict[str, Any]:
        found: dict[str, Any] = {}
        found["resources"] = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = (await client.list_resource_templates()).resource_templates
        found["templates"] = {t.uri_template for t in templates}
        found["tools"] = {t.name for t in (await client.list_tools()).tools}
        found["status"] = json.loads(text_of(await client.read_resource("pact://status")))
        found["budget"] = json.loads(text_of(await client.read_resource("pact://budget")))
        found["retro"] = json.loads(text_of(await client.read_resource("pact://retrospective")))
        found["contracts"] = json.loads(text_of(await client.read_resource("pact://contracts")))
        found["validate"] = await client.call_tool("pact_validate", {})
        found["resume"] = await client.call_tool("pact_resume", {})
        found["resume_false"] = await client.call_tool("pact_resume", {"confirm": False})
        return found

    before = (demo / ".pact" / "audit.jsonl").read_bytes()
    found = with_client(server("--project", str(demo)), talk)
    assert found["resources"] >= {
        "pact://status",
        "pact://contracts",
        "pact://budget",
        "pact://retrospective",
        "pact://runs",
    }
    assert "pact://contract/{component_id}" in found["templates"]
    assert found["tools"] == {"pact_validate", "pact_status", "pact_resume", "pact_submit"}
    status = found["status"]
    cli = json.loads(pact("status", str(demo), "--json").stdout)
    assert status["run_id"] == cli["run_id"] and status["status"] == "completed"
    assert status["usage"] == cli["usage"] and len(status["components"]) == 10
    assert found["budget"]["spent_usd"] == pytest.approx(cli["usage"]["cost_usd"])
    assert found["retro"]["run_id"] == cli["run_id"] and found["retro"]["saved"] is True
    assert {c["component_id"] for c in found["contracts"]} == {
        row["component_id"] for row in cli["components"]
    }
    validated = found["validate"]
    assert not validated.is_error
    report = json.loads(validated.content[0].text)
    assert report["contracts"] == 10 and report["ok"] is True and report["drift"] == []
    for refused in (found["resume"], found["resume_false"]):
        assert refused.is_error
        assert 'call it again with "confirm": true' in refused.content[0].text
    # Reading and refusing wrote nothing to the run.
    assert (demo / ".pact" / "audit.jsonl").read_bytes() == before


def test_status_resource_returns_json(demo: Path) -> None:
    async def talk(client: Client) -> str:
        return text_of(await client.read_resource("pact://status"))

    doc = json.loads(with_client(server(cwd=demo), talk))  # discovered from the cwd
    assert doc["status"] == "completed"
    assert doc["items"] == {"done": 30}
    assert doc["provenance"]["drift"] == []


def test_contract_resource_returns_interface(demo: Path) -> None:
    async def talk(client: Client) -> tuple[str, str]:
        good = text_of(await client.read_resource("pact://contract/lexer"))
        try:
            await client.read_resource("pact://contract/nonesuch")
        except Exception as exc:  # the SDK raises the server's error
            return good, str(exc)
        return good, ""

    good, refused = with_client(server("--project", str(demo)), talk)
    on_disk = json.loads((demo / ".pact/contracts/lexer/interface.json").read_text())
    contract = json.loads(good)
    assert contract["component_id"] == "lexer" == on_disk["component_id"]
    assert [f["name"] for f in contract["functions"]] == [f["name"] for f in on_disk["functions"]]
    assert "no promoted contract" in refused and "lexer" in refused


def test_validate_tool_returns_errors(demo: Path, tmp_path: Path) -> None:
    import shutil

    project = tmp_path / "edited"
    shutil.copytree(demo, project)
    interface = project / ".pact/contracts/tokens/interface.json"
    doc = json.loads(interface.read_text())
    doc["description"] += " Edited by hand."
    interface.write_text(json.dumps(doc))

    async def talk(client: Client) -> Any:
        return await client.call_tool("pact_validate", {})

    result = with_client(server("--project", str(project)), talk)
    report = json.loads(result.content[0].text)
    assert report["ok"] is False
    assert [(d["component_id"], d["artifact"], d["severity"]) for d in report["drift"]] == [
        ("tokens", "contract", "error")
    ]
    assert isinstance(report["findings"], list)


def test_mcp_server_starts_without_project(tmp_path: Path) -> None:
    async def talk(client: Client) -> tuple[set[str], str, Any]:
        names = {t.name for t in (await client.list_tools()).tools}
        try:
            await client.read_resource("pact://status")
            error = ""
        except Exception as exc:
            error = str(exc)
        return names, error, await client.call_tool("pact_status", {})

    names, error, status = with_client(server(cwd=tmp_path), talk)
    assert "pact_status" in names
    assert "no pact project" in error and "--project DIR" in error
    assert status.is_error and "no pact project" in status.content[0].text


# -- streamable HTTP ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(demo: Path) -> Iterator[tuple[int, str]]:
    port, token = free_port(), "pact-test-token-5b1e"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "mcp", "--project", str(demo), "--http", str(port)],
        env={**os.environ, "PACT_MCP_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.1)
        yield port, token
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "pact-test", "version": "1"},
    },
}


def post(port: int, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(INITIALIZE).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


def test_http_requires_the_bearer_token(http_server: tuple[int, str]) -> None:
    port, token = http_server
    assert post(port, {})[0] == 401
    assert post(port, {"Authorization": "Bearer wrong-token"})[0] == 401
    assert post(port, {"Authorization": token})[0] == 401  # not a bearer credential
    status, body = post(port, {"Authorization": f"Bearer {token}"})
    assert status == 200, body
    assert b'"serverInfo"' in body and b'"pact"' in body


def test_http_refuses_a_bad_argument_as_stdio_does_and_goes_on_serving(
    http_server: tuple[int, str],
) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    port, token = http_server

    async def main() -> tuple[Any, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http:
            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport, read_timeout_seconds=60) as client:
                bad = await client.call_tool("pact_validate", {"path": "/etc"})
                return bad, await client.call_tool("pact_status", {})

    bad, status = anyio.run(main)
    assert bad.is_error and "pact_validate: no argument 'path'" in bad.content[0].text
    assert not status.is_error and json.loads(status.content[0].text)["status"] == "completed"


def test_http_without_a_token_is_refused_at_start(demo: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PACT_MCP_TOKEN"}
    started = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "mcp", "--project", str(demo), "--http", "8"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    assert "PACT_MCP_TOKEN" in started.stderr and "Traceback" not in started.stderr


def test_a_confirmed_resume_resumes_the_failed_run(example: Path, tmp_path: Path) -> None:
    project = tmp_path / "failed"
    project.mkdir()
    (project / "pact.yaml").write_text("max_attempts: 1\n")  # the evaluator's first try fails
    failed = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert failed.returncode == 1

    notices: list[tuple[float, float | None, str | None]] = []

    async def noticed(progress: float, total: float | None, message: str | None) -> None:
        notices.append((progress, total, message))

    async def talk(client: Client) -> tuple[Any, Any, dict[str, Any]]:
        refused = await client.call_tool("pact_resume", {"confirm": "yes"})
        # A call the client cancels at its first notice stops the run after that step,
        # as Ctrl-C stops pact resume: the run is left interrupted, for a later resume.
        with anyio.CancelScope() as cancelled:

            async def cancel(progress: float, total: float | None, message: str | None) -> None:
                cancelled.cancel()

            await client.call_tool("pact_resume", {"confirm": True}, progress_callback=cancel)
        assert cancelled.cancelled_caught
        with anyio.fail_after(60):
            while True:  # until the server's thread has stopped the run
                resumed = await client.call_tool(
                    "pact_resume", {"confirm": True}, progress_callback=noticed
                )
                if not (resumed.is_error and "already resuming" in text_of_call(resumed)):
                    break
                notices.clear()
                await anyio.sleep(0.1)
        status = json.loads(text_of(await client.read_resource("pact://status")))
        return refused, resumed, status

    refused, resumed, status = with_client(server("--project", str(project)), talk)
    assert refused.is_error  # only the boolean true confirms
    assert not resumed.is_error, resumed.content[0].text
    assert json.loads(resumed.content[0].text)["status"] == "completed"
    assert status["status"] == "completed"
    # The client that asked for progress was told how far the run came, as it went:
    # items finished out of all, never backwards, ending with the run's end.
    assert notices, "no progress notification"
    done = [progress for progress, _, _ in notices]
    assert done == sorted(done), notices
    items = sum(status["items"].values())
    assert status["items"] == {"done": items} and items == 30
    assert {total for _, total, _ in notices} == {items}, notices
    assert notices[-1] == (items, items, "run completed")
    # Two resumes: the cancelled one, stopped before the end, and the one that ended it.
    log = (project / ".pact" / "audit.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in log]
    kinds = [event["type"] for event in events]
    assert kinds.count("run_resumed") == 2, kinds
    assert kinds.count("run_completed") == 1 and kinds[-1] == "run_completed"
    retro = json.loads(pact("retrospective", str(project), "--json").stdout)
    assert retro["status"] == "completed"
