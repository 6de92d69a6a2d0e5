"""``pact mcp --broker``: the scheduler service's runs as ``pact://runs`` and
``pact_submit`` (refused unless confirmed) on a real redis-server, through the SDK's
stdio client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra pact-fleet[mcp]")

from mcp.client import Client

from tests.acceptance.test_mcp_server import server, text_of, with_client


def test_runs_resource_and_confirmed_submission(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    tree = str(example / "tree.json")
    replay = str(example / "replay")

    async def talk(client: Client) -> dict[str, Any]:
        found: dict[str, Any] = {}
        found["before"] = json.loads(text_of(await client.read_resource("pact://runs")))
        found["refused"] = await client.call_tool(
            "pact_submit", {"trees": [tree], "replay_dir": replay}
        )
        found["after_refusal"] = json.loads(text_of(await client.read_resource("pact://runs")))
        found["submitted"] = await client.call_tool(
            "pact_submit", {"trees": [tree], "replay_dir": replay, "confirm": True}
        )
        found["after"] = json.loads(text_of(await client.read_resource("pact://runs")))
        return found

    found = with_client(server("--broker", redis_url, cwd=tmp_path), talk)
    assert found["before"] == [] and found["after_refusal"] == []
    assert found["refused"].is_error
    assert '"confirm": true' in found["refused"].content[0].text
    submitted = json.loads(found["submitted"].content[0].text)
    assert submitted["rejected"] == [] and len(submitted["queued"]) == 1
    run_id = submitted["queued"][0]["run_id"]
    assert [r["run_id"] for r in found["after"]] == [run_id]


def test_runs_resource_without_a_broker_says_how_to_give_one(tmp_path: Path) -> None:
    async def talk(client: Client) -> str:
        try:
            await client.read_resource("pact://runs")
        except Exception as exc:
            return str(exc)
        return ""

    assert "pact mcp --broker" in with_client(server(cwd=tmp_path), talk)
