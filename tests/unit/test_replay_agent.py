"""The replay agent serves files from its replay directory and from nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.replay import ReplayAgent
from pact_workers.errors import InputError, PermanentAgentError
from pact_workers.models.work import ROLE_FOR_PHASE, Phase

HOST_SECRET = b"a file of the host, outside the replay directory\n"


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "secret.txt"
    path.parent.mkdir()
    path.write_bytes(HOST_SECRET)
    return path


@pytest.fixture
def replay(tmp_path: Path) -> Path:
    directory = tmp_path / "replay"
    (directory / "calc" / "src").mkdir(parents=True)
    (directory / "calc" / "tests").mkdir()
    (directory / "calc" / "interface.json").write_bytes(b'{"component_id": "calc"}\n')
    (directory / "calc" / "src" / "calc.py").write_bytes(b"def add(a, b):\n    return a + b\n")
    (directory / "calc" / "tests" / "test_calc.py").write_bytes(b"def test_add(): pass\n")
    return directory


def produce(directory: Path, phase: Phase, component_id: str = "calc") -> dict[str, bytes]:
    request = AgentRequest(
        run_id="r1",
        component_id=component_id,
        phase=phase,
        role=ROLE_FOR_PHASE[phase],
        attempt=1,
    )
    return dict(ReplayAgent(directory).produce(request).files)


def test_files_inside_the_replay_directory_are_served(replay: Path) -> None:
    assert produce(replay, Phase.IMPLEMENT) == {
        "src/calc.py": b"def add(a, b):\n    return a + b\n"
    }
    assert produce(replay, Phase.CONTRACT) == {"interface.json": b'{"component_id": "calc"}\n'}
    assert produce(replay, Phase.TEST) == {"tests/test_calc.py": b"def test_add(): pass\n"}


@pytest.mark.parametrize(
    ("phase", "link", "shown"),
    [
        (Phase.IMPLEMENT, "calc/src/calc.py", "calc/src/calc.py"),
        (Phase.IMPLEMENT, "calc/src/extra.py", "calc/src/extra.py"),
        (Phase.CONTRACT, "calc/interface.json", "calc/interface.json"),
        (Phase.TEST, "calc/tests/test_calc.py", "calc/tests/test_calc.py"),
    ],
)
def test_a_file_linked_to_a_host_file_is_refused(
    replay: Path, host_file: Path, phase: Phase, link: str, shown: str
) -> None:
    target = replay / link
    target.unlink(missing_ok=True)
    target.symlink_to(host_file)
    with pytest.raises(PermanentAgentError, match="leaves the replay directory") as raised:
        produce(replay, phase)
    assert shown in str(raised.value)
    assert HOST_SECRET.decode().strip() not in str(raised.value)


def test_a_directory_linked_outside_is_refused(replay: Path, host_file: Path) -> None:
    tests = replay / "calc" / "tests"
    for path in tests.iterdir():
        path.unlink()
    tests.rmdir()
    tests.symlink_to(host_file.parent, target_is_directory=True)
    with pytest.raises(PermanentAgentError, match=r"calc/tests/secret\.txt leaves the replay"):
        produce(replay, Phase.TEST)


def test_a_component_id_that_climbs_out_with_dotdot_is_refused(
    replay: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside" / "src"
    outside.mkdir(parents=True)
    (outside / "mod.py").write_bytes(HOST_SECRET)
    with pytest.raises(PermanentAgentError, match="leaves the replay directory"):
        produce(replay, Phase.IMPLEMENT, component_id="../outside")


def test_a_scripted_files_directory_linked_outside_is_refused(replay: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "src").mkdir(parents=True)
    (elsewhere / "src" / "calc.py").write_bytes(HOST_SECRET)
    (replay / "second").symlink_to(elsewhere, target_is_directory=True)
    script = "script:\n  calc:\n    implement:\n      1: {files: second}\n"
    (replay / "replay.yaml").write_text(script, encoding="utf-8")
    with pytest.raises(PermanentAgentError, match=r"second/src/calc\.py leaves the replay"):
        produce(replay, Phase.IMPLEMENT)


def test_a_link_to_another_file_inside_the_replay_directory_is_served(replay: Path) -> None:
    shared = replay / "shared" / "helpers.py"
    shared.parent.mkdir()
    shared.write_bytes(b"HELP = 1\n")
    (replay / "calc" / "src" / "helpers.py").symlink_to(Path("..", "..", "shared", "helpers.py"))
    files = produce(replay, Phase.IMPLEMENT)
    assert files["src/helpers.py"] == b"HELP = 1\n"


def test_a_replay_directory_that_is_a_file_or_missing_says_which(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    with pytest.raises(InputError, match="afile: is not a directory"):
        ReplayAgent(afile)
    with pytest.raises(InputError, match="gone: no such directory"):
        ReplayAgent(tmp_path / "gone")
