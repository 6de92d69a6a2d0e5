"""The command agent on the local sandbox, with a real CLI agent (tests/agents)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.command import (
    PROMPT_FILE,
    CommandAgent,
    prompt_text,
    render_argv,
    sandbox_from_env,
)
from pact_workers.agents.factory import AgentConfig, AgentsSettings, agent_options, build_agent
from pact_workers.artifacts import Bundle
from pact_workers.errors import (
    InputError,
    PermanentAgentError,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.work import ROLE_FOR_PHASE, Phase, Role, Usage
from pact_workers.sandbox import LocalSandbox, SandboxRequest, SandboxResult
from tests.agents import fake_agent_argv, stage_agent_files
from tests.agents.fake_coding_agent import EVIDENCE_PREFIX

PHASE_OF = {role: phase for phase, role in ROLE_FOR_PHASE.items()}


class RecordingSandbox:
    """The local sandbox, remembering every request it ran."""

    name = "local"

    def __init__(self) -> None:
        self.requests: list[SandboxRequest] = []
        self._inner = LocalSandbox()
        self._lock = threading.Lock()

    def run(self, request: SandboxRequest) -> SandboxResult:
        with self._lock:
            self.requests.append(request)
        return self._inner.run(request)


# -- requests as the scheduler builds them (scheduler/inputs.py), from the example ---------


def _tree(example: Path) -> dict[str, dict[str, object]]:
    nodes: dict[str, dict[str, object]] = json.loads((example / "tree.json").read_text())["nodes"]
    return nodes


def _names(value: object) -> list[str]:
    assert isinstance(value, list)
    return [str(v) for v in value]


def make_request(example: Path, component: str, role: Role, **inputs: Bundle) -> AgentRequest:
    """The request for ``role`` on ``component``; ``inputs`` replace bundles by name."""
    replay = example / "replay"
    nodes = _tree(example)
    node = nodes[component]
    deps = _names(node.get("dependencies", []))
    children = _names(node["children"])
    spec = {
        "component_id": component,
        "name": node["name"],
        "description": node["description"],
        "parent_id": node["parent_id"],
        "children": [
            {"component_id": c, "name": nodes[c]["name"], "description": nodes[c]["description"]}
            for c in children
        ],
        "dependencies": deps,
    }
    bundles: dict[str, Bundle] = {"spec": {"component.json": json.dumps(spec).encode()}}
    related = deps if role is not Role.INTEGRATOR else list(dict.fromkeys([*deps, *children]))
    bundles["dep_contracts"] = {
        f"{d}/interface.json": (replay / d / "interface.json").read_bytes() for d in related
    }
    if role is not Role.CONTRACT_AUTHOR:
        bundles["contract"] = {
            "interface.json": (replay / component / "interface.json").read_bytes()
        }
    if role in {Role.CODE_AUTHOR, Role.INTEGRATOR}:
        bundles["deps_src"] = {
            f"src/{d}.py": (replay / d / "src" / f"{d}.py").read_bytes()
            for d in _closure(nodes, component)
        }
    bundles.update(inputs)
    return AgentRequest(
        run_id="run-1",
        component_id=component,
        phase=PHASE_OF[role],
        role=role,
        attempt=1,
        inputs=bundles,
    )


def _closure(nodes: dict[str, dict[str, object]], component: str) -> list[str]:
    seen: set[str] = set()
    todo = [
        *_names(nodes[component].get("dependencies", [])),
        *_names(nodes[component]["children"]),
    ]
    while todo:
        cid = todo.pop()
        if cid not in seen and cid != component:
            seen.add(cid)
            todo += [*_names(nodes[cid].get("dependencies", [])), *_names(nodes[cid]["children"])]
    return sorted(seen)


@pytest.fixture
def files_dir(example: Path, tmp_path: Path) -> Path:
    return stage_agent_files(example / "replay", tmp_path / "agent-files")


@pytest.fixture
def fake_agent(files_dir: Path) -> CommandAgent:
    return CommandAgent(
        fake_agent_argv(sys.executable), sandbox=LocalSandbox(), files_dir=files_dir, timeout_s=60
    )


def python_agent(code: str, **kw: object) -> CommandAgent:
    """A command agent whose command is ``python -c code``."""
    return CommandAgent([sys.executable, "-c", code], sandbox=LocalSandbox(), **kw)  # type: ignore[arg-type]


def strip_evidence(data: bytes) -> bytes:
    first, _, rest = data.partition(b"\n")
    assert first.startswith(EVIDENCE_PREFIX.encode()), first
    return rest


# -- the fake agent answers every role ------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "component", "expected"),
    [
        (Role.CONTRACT_AUTHOR, "lexer", {"interface.json": "interface.json"}),
        (Role.TEST_AUTHOR, "lexer", {"tests/contract_test.py": "tests/contract_test.py"}),
        (Role.CODE_AUTHOR, "lexer", {"src/lexer.py": "src/lexer.py"}),
        (Role.INTEGRATOR, "lexing", {"src/lexing.py": "src/lexing.py"}),
    ],
)
def test_the_fake_agent_answers_each_role_with_the_files_that_role_must_produce(
    fake_agent: CommandAgent,
    example: Path,
    role: Role,
    component: str,
    expected: dict[str, str],
) -> None:
    output = fake_agent.produce(make_request(example, component, role))
    assert sorted(output.files) == sorted(expected)
    for path, source in expected.items():
        known = (example / "replay" / component / source).read_bytes()
        got = output.files[path]
        assert (strip_evidence(got) if path.endswith(".py") else got) == known
    assert output.usage == Usage()  # a CLI agent reports no tokens
    assert output.model == f"command:{Path(sys.executable).name}"


def test_the_python_files_it_writes_record_the_network_and_the_workspace(
    fake_agent: CommandAgent, example: Path
) -> None:
    output = fake_agent.produce(make_request(example, "lexer", Role.CODE_AUTHOR))
    first = output.files["src/lexer.py"].decode().splitlines()[0]
    assert "role=code_author component=lexer" in first
    assert "network=" in first and "workspace=" in first


def test_the_prompt_file_holds_the_rendered_prompt_and_how_to_answer_with_files(
    example: Path,
) -> None:
    request = make_request(example, "lexer", Role.CODE_AUTHOR)
    agent = python_agent(
        "import os, shutil; os.makedirs('src'); shutil.copy('prompt.md', 'src/prompt.md')"
    )
    output = agent.produce(request)
    prompt = output.files["src/prompt.md"].decode()
    assert prompt == prompt_text(request)
    assert prompt.startswith("You are the code author")
    assert "\n# Component lexer\n" in prompt
    assert "## Working in this workspace" in prompt and "`src/lexer.py`" in prompt


def test_the_workspace_holds_the_prompt_the_inputs_and_the_contract(example: Path) -> None:
    request = make_request(example, "lexer", Role.TEST_AUTHOR)
    files = python_agent("pass").workspace(request)
    contract = (example / "replay" / "lexer" / "interface.json").read_bytes()
    assert files[PROMPT_FILE].decode() == prompt_text(request)
    assert files["interface.json"] == contract
    assert files["inputs/contract/interface.json"] == contract
    assert "inputs/spec/component.json" in files
    assert "inputs/dep_contracts/tokens/interface.json" in files


def test_a_code_author_workspace_holds_no_test_files(example: Path) -> None:
    request = make_request(example, "lexer", Role.CODE_AUTHOR)
    listing = (
        "import os, pathlib; os.makedirs('src');"
        "names = sorted(p.as_posix() for p in pathlib.Path('.').rglob('*') if p.is_file());"
        "pathlib.Path('src/listing.txt').write_text(chr(10).join(names))"
    )
    output = python_agent(listing).produce(request)
    names = output.files["src/listing.txt"].decode().splitlines()
    assert "prompt.md" in names and "inputs/deps_src/src/tokens.py" in names
    assert not [n for n in names if "tests" in n.split("/") or n.endswith("_test.py")]
    test_source = (example / "replay" / "lexer" / "tests" / "contract_test.py").read_text()
    first_test = next(line for line in test_source.splitlines() if line.startswith("def test_"))
    assert first_test not in prompt_text(request)


def test_test_files_in_a_code_authors_inputs_are_refused_before_anything_runs(
    example: Path,
) -> None:
    sandbox = RecordingSandbox()
    agent = CommandAgent([sys.executable, "-c", "pass"], sandbox=sandbox)
    leaked = make_request(
        example, "lexer", Role.CODE_AUTHOR, tests={"tests/contract_test.py": b"def test_x(): 1"}
    )
    with pytest.raises(PermanentAgentError, match="adversarial split"):
        agent.produce(leaked)
    assert sandbox.requests == []


def test_the_fake_agent_refuses_to_implement_with_tests_in_its_workspace(
    example: Path, files_dir: Path
) -> None:
    (files_dir / "notes" / "tests").mkdir(parents=True)
    (files_dir / "notes" / "tests" / "contract_test.py").write_text("def test_x(): pass\n")
    agent = CommandAgent(
        fake_agent_argv(sys.executable), sandbox=LocalSandbox(), files_dir=files_dir
    )
    with pytest.raises(PermanentAgentError, match=r"refused: .*notes/tests/contract_test\.py"):
        agent.produce(make_request(example, "lexer", Role.CODE_AUTHOR))


def test_the_fake_agent_refuses_a_contract_it_does_not_know(
    fake_agent: CommandAgent, example: Path
) -> None:
    contract = json.loads((example / "replay" / "lexer" / "interface.json").read_text())
    contract["description"] = "something else entirely"
    request = make_request(
        example,
        "lexer",
        Role.CODE_AUTHOR,
        contract={"interface.json": json.dumps(contract).encode()},
    )
    with pytest.raises(PermanentAgentError, match="not the contract I know for 'lexer'"):
        fake_agent.produce(request)


def test_the_fake_agent_refuses_when_a_dependency_source_is_missing(
    fake_agent: CommandAgent, example: Path
) -> None:
    request = make_request(example, "lexer", Role.CODE_AUTHOR, deps_src={})
    with pytest.raises(PermanentAgentError, match="source of dependency 'tokens' is missing"):
        fake_agent.produce(request)


# -- failures --------------------------------------------------------------------------------


def test_a_failing_command_is_a_permanent_error_carrying_its_stderr(example: Path) -> None:
    agent = python_agent(
        "import sys; sys.stderr.write('model refused: bad prompt\\n'); sys.exit(4)"
    )
    with pytest.raises(PermanentAgentError) as info:
        agent.produce(make_request(example, "lexer", Role.CODE_AUTHOR))
    assert not isinstance(info.value, TransientAgentError)
    message = str(info.value)
    assert "exited with 4" in message and "'lexer' (code_author)" in message
    assert message.endswith("model refused: bad prompt")


def test_a_command_that_times_out_is_a_transient_error(example: Path) -> None:
    agent = python_agent("import time; time.sleep(60)", timeout_s=0.5)
    with pytest.raises(TransientAgentError, match=r"ran past its 0\.5 s timeout"):
        agent.produce(make_request(example, "lexer", Role.TEST_AUTHOR))


def test_a_command_that_fails_on_the_network_is_a_transient_error(example: Path) -> None:
    agent = python_agent("import sys; sys.exit('API error: connection reset by peer')")
    with pytest.raises(TransientAgentError, match="connection reset by peer"):
        agent.produce(make_request(example, "lexer", Role.TEST_AUTHOR))


@pytest.mark.parametrize(
    ("role", "expected"),
    [(Role.CONTRACT_AUTHOR, "no interface.json"), (Role.TEST_AUTHOR, "no tests/")],
)
def test_a_command_that_writes_nothing_is_a_permanent_error_saying_what_was_expected(
    example: Path, role: Role, expected: str
) -> None:
    agent = python_agent("print('I thought about it')")
    with pytest.raises(PermanentAgentError, match=expected) as info:
        agent.produce(make_request(example, "lexer", role))
    assert "I thought about it" in str(info.value)


def test_only_what_the_role_must_produce_is_collected(example: Path) -> None:
    code = (
        "import os; os.makedirs('src'); open('src/x.py', 'w').write('x = 1');"
        "open('notes.txt', 'w').write('n')"
    )
    with pytest.raises(PermanentAgentError, match="no interface.json"):
        python_agent(code).produce(make_request(example, "lexer", Role.CONTRACT_AUTHOR))


def test_unchanged_copies_of_dependency_sources_are_not_part_of_the_output(
    example: Path,
) -> None:
    code = (
        "import shutil; shutil.copytree('inputs/deps_src/src', 'src');"
        "open('src/lexer.py', 'w').write('LEXER = 1')"
    )
    output = python_agent(code).produce(make_request(example, "lexer", Role.CODE_AUTHOR))
    assert output.files == {"src/lexer.py": b"LEXER = 1"}


# -- the sandbox request ----------------------------------------------------------------------


def test_the_agent_request_has_the_network_on_and_the_configured_timeout(
    fake_agent: CommandAgent, example: Path
) -> None:
    sandbox = RecordingSandbox()
    agent = CommandAgent(fake_agent.argv, sandbox=sandbox, files_dir=fake_agent.files_dir)
    agent.produce(make_request(example, "lexer", Role.CONTRACT_AUTHOR))
    (request,) = sandbox.requests
    assert request.network is True
    assert request.timeout_s == 1800.0
    assert request.collect == ["interface.json"]
    assert request.command[1:3] == ["fake_coding_agent.py", "--prompt"]
    assert request.command[3] == "prompt.md"


def test_the_configuration_can_turn_the_network_off() -> None:
    config = AgentConfig(backend="command", argv=["agent"], network=False, timeout_s=42)
    agent = CommandAgent.from_config(config, sandbox=LocalSandbox())
    request = AgentRequest(
        run_id="r", component_id="c", phase=Phase.TEST, role=Role.TEST_AUTHOR, attempt=1
    )
    sandbox_request = agent.sandbox_request(request)
    assert sandbox_request.network is False and sandbox_request.timeout_s == 42
    assert sandbox_request.environment.required_tools == ["agent"]


def test_the_argv_template_is_filled_in_per_attempt() -> None:
    template = ["tool", "--cd", "{workspace}", "@{prompt_file}", "{role}/{component}", "{python}"]
    assert render_argv(template, role=Role.INTEGRATOR, component="calc") == [
        "tool",
        "--cd",
        ".",
        "@prompt.md",
        "integrator/calc",
        "{python}",  # the sandbox's own placeholder, left for it
    ]


def test_only_the_named_environment_variables_reach_the_command_and_are_masked(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACT_TEST_API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("PACT_TEST_EXTRA", "extra")
    monkeypatch.setenv("PACT_TEST_UNNAMED", "unnamed")
    code = (
        "import os, json, sys; os.makedirs('src');"
        "names = ['PACT_TEST_API_KEY', 'PACT_TEST_EXTRA', 'PACT_TEST_UNNAMED'];"
        "json.dump({n: os.environ.get(n) for n in names}, open('src/env.json', 'w'));"
        "sys.exit('leaking ' + os.environ['PACT_TEST_API_KEY']) if len(sys.argv) > 1 else None"
    )
    config = AgentConfig(
        backend="command",
        argv=[sys.executable, "-c", code],
        api_key_env="PACT_TEST_API_KEY",
        env_passthrough=["PACT_TEST_EXTRA"],
    )
    agent = CommandAgent.from_config(config, sandbox=LocalSandbox())
    output = agent.produce(make_request(example, "lexer", Role.CODE_AUTHOR))
    assert json.loads(output.files["src/env.json"]) == {
        "PACT_TEST_API_KEY": "sk-very-secret-value",
        "PACT_TEST_EXTRA": "extra",
        "PACT_TEST_UNNAMED": None,
    }
    agent.argv.append("fail")
    with pytest.raises(PermanentAgentError) as info:
        agent.produce(make_request(example, "lexer", Role.CODE_AUTHOR))
    assert "sk-very-secret-value" not in str(info.value) and "leaking ***" in str(info.value)


# -- construction -----------------------------------------------------------------------------


def test_from_config_reads_files_dir_and_env_passthrough(files_dir: Path, example: Path) -> None:
    config = AgentConfig(
        backend="command",
        argv=fake_agent_argv(sys.executable),
        files_dir=str(files_dir),
        env_passthrough=["A_KEY", "B_KEY"],
        api_key_env="B_KEY",
    )
    agent = CommandAgent.from_config(config, sandbox=LocalSandbox())
    assert agent.files_dir == files_dir and agent.env_passthrough == ("B_KEY", "A_KEY")
    output = agent.produce(make_request(example, "tokens", Role.CONTRACT_AUTHOR))
    assert list(output.files) == ["interface.json"]


def test_the_factory_builds_a_command_agent_for_every_role() -> None:
    settings = AgentsSettings(default=AgentConfig(argv=["agent", "{prompt_file}"]))
    routed = build_agent("command", agent_options("command", settings))
    agents = getattr(routed, "agents", {})
    # Every role but the trace analyst, which only a pact.yaml that configures it gets.
    assert {role for role in agents} == set(Role) - {Role.TRACE_ANALYST}
    assert all(isinstance(a, CommandAgent) and a.argv[0] == "agent" for a in agents.values())


def test_an_empty_argv_is_bad_input() -> None:
    with pytest.raises(InputError, match="argv"):
        CommandAgent.from_config(AgentConfig(backend="command"))


def test_the_sandbox_comes_from_pact_sandbox_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACT_SANDBOX", "nowhere")
    agent = CommandAgent(["agent"])  # nothing is built yet
    with pytest.raises(SystemicAgentError, match="PACT_SANDBOX='nowhere'"):
        agent.sandbox  # noqa: B018
    monkeypatch.delenv("PACT_SANDBOX")
    assert isinstance(agent.sandbox, LocalSandbox)
    monkeypatch.setenv("PACT_SANDBOX", "docker")
    assert sandbox_from_env().name == "docker"  # connects only when it first runs


def test_a_files_dir_that_is_missing_or_shadows_the_workspace_is_a_systemic_error(
    example: Path, tmp_path: Path
) -> None:
    request = make_request(example, "lexer", Role.CODE_AUTHOR)
    with pytest.raises(SystemicAgentError, match="not a directory on this worker"):
        CommandAgent(["agent"], files_dir=tmp_path / "missing").workspace(request)
    (tmp_path / "tools" / "src").mkdir(parents=True)
    (tmp_path / "tools" / "src" / "helper.py").write_text("")
    with pytest.raises(SystemicAgentError, match="'src/helper.py' would shadow"):
        CommandAgent(["agent"], files_dir=tmp_path / "tools").workspace(request)
