"""The action cache's parts without a run: the key, entries, both backends (one contract
suite, the Redis backend on fakeredis here and on a real server in the integration
tests), the factory, the modes, and how its events fold into the run state."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from pact_workers.artifacts import ArtifactStore, MemoryBlobStore
from pact_workers.errors import ArtifactError, InputError, SettingsError
from pact_workers.fleet import keys
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.tree import DecompositionTree, tree_from_data
from pact_workers.models.work import ItemStatus, Phase, Usage
from scheduler.cache import (
    CACHE_DIR_ENV,
    ActionCache,
    CacheEntry,
    CacheError,
    CacheMode,
    DirectoryActionCache,
    KeyBasis,
    RedisActionCache,
    action_key,
    default_cache_dir,
    effective_mode,
    embedded_cache,
    from_config,
    from_url,
    key_basis,
)
from scheduler.cache.key import directory_digest
from scheduler.events import (
    CachedResult,
    CacheDropped,
    CacheHit,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunStarted,
)
from scheduler.fold import fold
from scheduler.settings import Settings, load_settings
from scheduler.state import RunState

OUTPUT_FILES = {"src/store.py": b"NAME = 'store'\n"}
OUTPUT = ArtifactStore(MemoryBlobStore()).put_bundle(OUTPUT_FILES)
KEY = "sha256:" + "1" * 64
OTHER_KEY = "sha256:" + "2" * 64


def tree_data() -> dict[str, Any]:
    return {
        "root_id": "app",
        "nodes": {
            "app": {"component_id": "app", "name": "App", "children": ["store", "api"]},
            "store": {"component_id": "store", "name": "Store", "parent_id": "app"},
            "api": {
                "component_id": "api",
                "name": "API",
                "parent_id": "app",
                "description": "serves the store",
                "dependencies": ["store"],
            },
        },
    }


def tree_of(data: dict[str, Any]) -> DecompositionTree:
    return tree_from_data(data, "<test>")


ROLES = {
    role: {
        "backend": "anthropic",
        "model": "claude-sonnet-4-6",
        "base_url": None,
        "api_key_env": "ANTHROPIC_API_KEY",
        "max_tokens": 16000,
        "idle_timeout_s": 120.0,
        "max_retries": 4,
        "timeout_s": 1800.0,
    }
    for role in ("contract_author", "test_author", "code_author", "integrator")
}


def options(**changes: Any) -> dict[str, str]:
    roles = json.loads(json.dumps(ROLES))
    for role in roles.values():
        role.update(changes)
    return {"roles": json.dumps(roles)}


def key_of(
    *,
    data: dict[str, Any] | None = None,
    basis: KeyBasis | None = None,
    phase: Phase = Phase.IMPLEMENT,
    inputs: dict[str, str] | None = None,
    verify_inputs: dict[str, str] | None = None,
    dependencies: dict[str, list[str]] | None = None,
) -> str:
    tree = tree_of(data or tree_data())
    return action_key(
        basis or key_basis("anthropic", options(), environment=EnvironmentSpec(), sandbox="local"),
        tree=tree,
        dependencies=dependencies or {"api": ["store"]},
        component_id="api",
        phase=phase,
        inputs={"spec": "sha256:" + "a" * 64} if inputs is None else inputs,
        verify_inputs={"tests": "sha256:" + "b" * 64} if verify_inputs is None else verify_inputs,
    )


# -- the key ----------------------------------------------------------------------


def changed_node(field: str, value: Any) -> dict[str, Any]:
    data = tree_data()
    data["nodes"]["api"][field] = value
    return data


KEY_CHANGES: dict[str, Callable[[], str]] = {
    "the component's name": lambda: key_of(data=changed_node("name", "Api server")),
    "its description": lambda: key_of(data=changed_node("description", "serves it faster")),
    "its declared dependencies": lambda: key_of(data=changed_node("dependencies", [])),
    "the dependencies the run knows": lambda: key_of(dependencies={"api": []}),
    "its children": lambda: key_of(
        data={
            **tree_data(),
            "nodes": {
                **tree_data()["nodes"],
                "api": {**tree_data()["nodes"]["api"], "children": ["route"]},
                "route": {"component_id": "route", "name": "Route", "parent_id": "api"},
            },
        },
        phase=Phase.INTEGRATE,
    ),
    "the phase (and role)": lambda: key_of(phase=Phase.TEST),
    "an input the agent sees": lambda: key_of(inputs={"spec": "sha256:" + "c" * 64}),
    "an input only the harness sees": lambda: key_of(verify_inputs={"tests": "sha256:" + "d" * 64}),
    "the model": lambda: key_of(
        basis=key_basis(
            "anthropic",
            options(model="claude-haiku-4-5"),
            environment=EnvironmentSpec(),
            sandbox="",
        )
    ),
    "the server": lambda: key_of(
        basis=key_basis(
            "anthropic",
            options(base_url="http://gpu-box:8000/v1"),
            environment=EnvironmentSpec(),
            sandbox="",
        )
    ),
    "the output limit": lambda: key_of(
        basis=key_basis(
            "anthropic", options(max_tokens=4000), environment=EnvironmentSpec(), sandbox=""
        )
    ),
    "the backend": lambda: key_of(
        basis=key_basis(
            "openai", options(backend="openai"), environment=EnvironmentSpec(), sandbox=""
        )
    ),
    "the environment spec": lambda: key_of(
        basis=key_basis(
            "anthropic",
            options(),
            environment=EnvironmentSpec(pytest_plugins=["asyncio"]),
            sandbox="",
        )
    ),
    "the sandbox": lambda: key_of(
        basis=key_basis("anthropic", options(), environment=EnvironmentSpec(), sandbox="docker")
    ),
}


@pytest.mark.parametrize("what", sorted(KEY_CHANGES))
def test_everything_that_decides_the_result_changes_the_key(what: str) -> None:
    assert key_of().startswith("sha256:")
    assert KEY_CHANGES[what]() != key_of()


@pytest.mark.parametrize(
    "changes",
    [
        {"api_key_env": "MY_OTHER_KEY"},
        {"idle_timeout_s": 5.0},
        {"max_retries": 0},
        {"timeout_s": 60.0},
    ],
)
def test_how_a_call_is_made_and_its_key_do_not_change_the_key(changes: dict[str, Any]) -> None:
    basis = key_basis("anthropic", options(**changes), environment=EnvironmentSpec(), sandbox="")
    assert key_of(basis=basis) == key_of()


def test_the_key_never_holds_a_secret_only_the_digest_of_what_decides_the_result() -> None:
    secret = "sk-ant-0123456789"
    spec = EnvironmentSpec(env_vars={"TOKEN": secret})
    basis = key_basis("anthropic", options(), environment=spec, sandbox="")
    key = key_of(basis=basis)
    assert secret not in key and key != key_of()


def test_the_same_work_item_in_another_run_has_the_same_key() -> None:
    # Nothing of the run itself (id, attempt, feedback, where it lives) goes in.
    assert key_of() == key_of()
    assert key_of(data=changed_node("depth", 7)) == key_of()


def test_the_prompt_version_and_text_are_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = key_of()
    import scheduler.cache.key as key_module

    monkeypatch.setattr(key_module, "load_template", lambda role, version=None: "edited")
    assert key_of() != before


def test_the_replay_agents_model_is_its_directorys_content(tmp_path: Path) -> None:
    replay = tmp_path / "replay"
    (replay / "api" / "src").mkdir(parents=True)
    (replay / "api" / "src" / "api.py").write_text("A = 1\n")

    def replay_key(directory: Path) -> str:
        basis = key_basis(
            "replay", {"replay_dir": str(directory)}, environment=EnvironmentSpec(), sandbox=""
        )
        return key_of(basis=basis)

    first = replay_key(replay)
    copy = tmp_path / "elsewhere"
    shutil.copytree(replay, copy)
    assert replay_key(copy) == first  # where it lives is not what it serves
    (replay / "replay.yaml").write_text("latency_s: {code_author: 1}\n")
    assert replay_key(replay) != first  # its script is part of what it does
    (replay / "replay.yaml").unlink()
    (replay / "api" / "src" / "api.py").write_text("A = 2\n")
    assert replay_key(replay) != first


def test_a_replay_directory_digest_ignores_bytecode_and_follows_links_inside(
    tmp_path: Path,
) -> None:
    replay = tmp_path / "replay"
    (replay / "api").mkdir(parents=True)
    (replay / "api" / "interface.json").write_text("{}")
    before = directory_digest(replay)
    (replay / "api" / "__pycache__").mkdir()
    (replay / "api" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert directory_digest(replay) == before
    outside = tmp_path / "host.txt"
    outside.write_text("host")
    (replay / "api" / "link").symlink_to(outside)
    assert directory_digest(replay) != before


def test_a_run_whose_agent_cannot_be_identified_has_no_key_basis(tmp_path: Path) -> None:
    env = EnvironmentSpec()
    with pytest.raises(CacheError, match="replay directory"):
        key_basis("replay", {"replay_dir": str(tmp_path / "gone")}, environment=env, sandbox="")
    with pytest.raises(CacheError, match="code_author"):
        roles = {k: v for k, v in ROLES.items() if k != "code_author"}
        key_basis("anthropic", {"roles": json.dumps(roles)}, environment=env, sandbox="")
    with pytest.raises(CacheError, match="malformed"):
        key_basis("openai", {"roles": "{"}, environment=env, sandbox="")


def test_the_trace_analyst_shapes_the_code_authors_key_only() -> None:
    with_analyst = json.loads(json.dumps(ROLES))
    with_analyst["trace_analyst"] = {**ROLES["code_author"], "model": "claude-haiku-4-5"}
    basis = key_basis(
        "anthropic",
        {"roles": json.dumps(with_analyst)},
        environment=EnvironmentSpec(),
        sandbox="",
    )
    assert key_of(basis=basis) != key_of()
    assert key_of(basis=basis, phase=Phase.TEST) == key_of(phase=Phase.TEST)


# -- entries -------------------------------------------------------------------------


def entry(key: str = KEY, **changes: Any) -> CacheEntry:
    fields: dict[str, Any] = {
        "key": key,
        "output": OUTPUT,
        "component_id": "store",
        "phase": Phase.IMPLEMENT,
        "files": sorted(OUTPUT_FILES),
        "usage": Usage(input_tokens=100, output_tokens=50, cost_usd=0.25),
        "duration_s": 12.5,
        "run_id": "r1",
        "agent": "anthropic claude-sonnet-4-6",
        # fixed, so two calls across a second's turn build equal entries
        "recorded_at": "2026-01-02T03:04:05+00:00",
    }
    fields.update(changes)
    return CacheEntry(**fields)


def test_an_entry_reads_back_as_it_was_written() -> None:
    assert CacheEntry.from_bytes(entry().to_bytes(), KEY) == entry()


@pytest.mark.parametrize(
    "raw", [b"", b"not json", b"{}", json.dumps({"key": KEY}).encode(), b"\xff\xfe"]
)
def test_an_unreadable_entry_is_a_miss(raw: bytes) -> None:
    assert CacheEntry.from_bytes(raw, KEY) is None


def test_an_entry_stored_under_another_key_is_a_miss() -> None:
    assert CacheEntry.from_bytes(entry().to_bytes(), OTHER_KEY) is None


@pytest.mark.parametrize("field", ["key", "output"])
def test_an_entry_names_its_key_and_result_by_well_formed_digests(field: str) -> None:
    with pytest.raises(ValueError, match="malformed"):
        entry(**{field: "sha256:../../etc"})


# -- one contract suite over both backends -------------------------------------------


@pytest.fixture(params=["directory", "redis"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ActionCache]:
    if request.param == "directory":
        yield DirectoryActionCache(tmp_path / "cache")
        return
    client = fakeredis.FakeRedis()
    yield RedisActionCache(client)
    client.close()


def test_a_backend_is_an_action_cache(cache: ActionCache) -> None:
    assert isinstance(cache, ActionCache)
    assert cache.name in {"directory", "redis"} and cache.location


def test_an_unknown_key_is_a_miss(cache: ActionCache) -> None:
    assert cache.get(KEY) is None


def test_a_stored_entry_and_its_files_are_found_by_key(cache: ActionCache) -> None:
    cache.put(entry(), OUTPUT_FILES)
    assert cache.get(KEY) == entry()
    assert cache.files(entry()) == OUTPUT_FILES
    assert cache.get(OTHER_KEY) is None


def test_a_new_entry_for_a_key_replaces_the_old_one(cache: ActionCache) -> None:
    cache.put(entry(), OUTPUT_FILES)
    other_files = {"src/store.py": b"NAME = 'better store'\n"}
    better = entry(output=ArtifactStore(MemoryBlobStore()).put_bundle(other_files))
    cache.put(better, other_files)
    assert cache.get(KEY) == better
    assert cache.files(better) == other_files


def test_files_that_are_not_the_entrys_result_are_refused(cache: ActionCache) -> None:
    with pytest.raises(ArtifactError, match="not"):
        cache.put(entry(), {"src/store.py": b"something else\n"})
    assert cache.get(KEY) is None  # nothing names files the cache does not have


def test_a_malformed_key_is_refused_before_anything_is_read(cache: ActionCache) -> None:
    with pytest.raises(ArtifactError, match="malformed action key"):
        cache.get("../../etc/passwd")


def test_files_gone_from_the_cache_are_an_artifact_error(cache: ActionCache) -> None:
    gone = entry(output="sha256:" + "9" * 64)
    with pytest.raises(ArtifactError):
        cache.files(gone)


# -- backend specifics --------------------------------------------------------------


def test_a_corrupt_entry_file_is_a_miss(tmp_path: Path) -> None:
    cache = DirectoryActionCache(tmp_path / "cache")
    cache.put(entry(), OUTPUT_FILES)
    path = next((tmp_path / "cache" / "entries").rglob("*.json"))
    path.write_bytes(b'{"key": "sha256:tr')
    assert cache.get(KEY) is None


def test_the_cache_directory_is_private_to_its_user(tmp_path: Path) -> None:
    DirectoryActionCache(tmp_path / "cache").put(entry(), OUTPUT_FILES)
    assert (tmp_path / "cache").stat().st_mode & 0o077 == 0


def test_redis_entries_live_under_the_documented_key_with_a_ttl_renewed_by_hits() -> None:
    client = fakeredis.FakeRedis()
    cache = RedisActionCache(client, ttl_s=100)
    cache.put(entry(), OUTPUT_FILES)
    assert client.exists(keys.action(KEY)) and keys.action(KEY) == f"pact:cache:{KEY}"
    assert "pact:cache:" in (keys.__doc__ or "")
    client.expire(keys.action(KEY), 5)
    assert cache.get(KEY) == entry()
    assert client.ttl(keys.action(KEY)) > 5
    client.close()


def test_a_redis_entry_is_kept_as_long_as_its_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry that outlived its files would be a miss taking memory: both are kept
    ``PACT_ARTIFACT_TTL_S`` after the record, and a hit renews the entry for as long."""
    monkeypatch.setenv("PACT_ARTIFACT_TTL_S", "500")
    client = fakeredis.FakeRedis()
    cache = RedisActionCache(client)
    cache.put(entry(), OUTPUT_FILES)
    blobs = [name for name in client.scan_iter(match="pact:artifact:*")]
    assert blobs and all(400 < client.ttl(name) <= 500 for name in blobs)
    assert 400 < client.ttl(keys.action(KEY)) <= 500
    client.expire(keys.action(KEY), 5)
    assert cache.get(KEY) == entry()
    assert 400 < client.ttl(keys.action(KEY)) <= 500
    client.close()


# -- modes, the factory, settings --------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "agent", "mode"),
    [
        (None, "anthropic", CacheMode.VERIFY),
        (None, "openai", CacheMode.VERIFY),
        (None, "command", CacheMode.VERIFY),
        (None, "replay", CacheMode.OFF),
        (None, "noop", CacheMode.OFF),
        (None, "", CacheMode.OFF),
        ("verify", "replay", CacheMode.VERIFY),
        ("trust", "noop", CacheMode.TRUST),
        ("off", "anthropic", CacheMode.OFF),
    ],
)
def test_the_mode_is_pact_yamls_else_verify_for_a_real_agent(
    setting: str | None, agent: str, mode: CacheMode
) -> None:
    assert effective_mode(setting, agent) is mode


def test_pact_yaml_names_the_cache_mode(tmp_path: Path) -> None:
    path = tmp_path / "pact.yaml"
    path.write_text("cache: trust\n")
    assert load_settings(path).cache is CacheMode.TRUST
    assert Settings().cache is None
    path.write_text("cache: sometimes\n")
    with pytest.raises(SettingsError, match="cache"):
        load_settings(path)


def test_the_default_directory_is_under_the_users_cache_directory(tmp_path: Path) -> None:
    home = Path.home()
    assert default_cache_dir({}) == home / ".cache" / "pact-fleet"
    assert default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "pact-fleet"
    assert default_cache_dir({"XDG_CACHE_HOME": "relative"}) == home / ".cache" / "pact-fleet"
    explicit = {CACHE_DIR_ENV: str(tmp_path / "mine"), "XDG_CACHE_HOME": "/elsewhere"}
    assert default_cache_dir(explicit) == tmp_path / "mine"


def test_the_factory_builds_each_backend_from_a_url_or_the_configuration(tmp_path: Path) -> None:
    assert isinstance(from_url(str(tmp_path / "c")), DirectoryActionCache)
    assert isinstance(from_url(f"file://{tmp_path}/c"), DirectoryActionCache)
    redis_cache = from_url("redis://127.0.0.1:1/0")
    assert isinstance(redis_cache, RedisActionCache)
    redis_cache.client.close()
    with pytest.raises(SettingsError):
        from_url("redis://host:notaport/0")
    env = {CACHE_DIR_ENV: str(tmp_path / "from-env")}
    made = from_config(environ=env)
    assert isinstance(made, DirectoryActionCache) and made.root == tmp_path / "from-env"
    assert not (tmp_path / "from-env").exists()  # nothing is written until a result is


def test_a_cache_directory_that_cannot_be_used_is_named(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(CacheError, match=f"{CACHE_DIR_ENV}=.*file/cache: is under"):
        from_config(environ={CACHE_DIR_ENV: str(a_file / "cache")})
    with pytest.raises(CacheError, match="not a directory"):
        from_config(directory=a_file)


def test_an_embedded_run_refuses_a_bad_pact_cache_dir_and_warns_about_a_bad_default(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    warnings: list[str] = []
    with pytest.raises(InputError, match=CACHE_DIR_ENV):
        embedded_cache(None, "anthropic", "local", warnings, environ={CACHE_DIR_ENV: str(a_file)})
    bad_default = {"XDG_CACHE_HOME": str(a_file)}
    assert embedded_cache(None, "anthropic", "local", warnings, environ=bad_default) is None
    assert warnings and "without the action cache" in warnings[0]
    good = {CACHE_DIR_ENV: str(tmp_path / "c")}
    assert embedded_cache(None, "replay", "local", [], environ=good) is None
    assert embedded_cache(None, "anthropic", "celery", [], environ=good) is None
    assert isinstance(embedded_cache(None, "anthropic", "local", [], environ=good), ActionCache)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_cache_directory_is_named(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(CacheError, match="not writable"):
            from_config(directory=locked / "cache")
    finally:
        locked.chmod(0o700)


# -- events fold into the run state ------------------------------------------------


def folded(*events: Any) -> RunState:
    tree = tree_of(tree_data())
    started = RunStarted(run_id="r2", tree=tree.model_dump(mode="json"), agent="anthropic", seq=1)
    return fold([started, *[e.model_copy(update={"seq": n}) for n, e in enumerate(events, 2)]])


HIT = CachedResult(output=OUTPUT, source_run="r1", saved=Usage(cost_usd=0.25))


def dispatched(attempt: int = 1, cached: CachedResult | None = HIT) -> ItemDispatched:
    return ItemDispatched(
        component_id="store",
        phase=Phase.CONTRACT,
        attempt=attempt,
        role="contract_author",
        action_key=KEY,
        cached=cached,
    )


def succeeded(output: str = OUTPUT) -> ItemSucceeded:
    return ItemSucceeded(component_id="store", phase=Phase.CONTRACT, attempt=1, output=output)


def test_a_hit_folds_into_an_item_served_from_the_cache_at_no_cost() -> None:
    hit = CacheHit(
        component_id="store",
        phase=Phase.CONTRACT,
        attempt=1,
        action_key=KEY,
        output=OUTPUT,
        saved=Usage(cost_usd=0.25),
    )
    state = folded(dispatched(), hit, succeeded())
    item = state.item("store", Phase.CONTRACT)
    assert item.status is ItemStatus.DONE and item.cache == "hit" and item.cached is None
    assert item.saved.cost_usd == 0.25 and item.usage.cost_usd == 0 and item.action_key == KEY


def test_a_hit_dropped_by_the_runs_checks_sends_the_item_back_to_pending() -> None:
    drop = CacheDropped(
        component_id="store",
        phase=Phase.CONTRACT,
        attempt=1,
        action_key=KEY,
        output=OUTPUT,
        reason="contract rejected",
        redispatch=True,
    )
    state = folded(dispatched(), drop)
    item = state.item("store", Phase.CONTRACT)
    assert item.status is ItemStatus.READY and item.cache == "dropped"  # to be dispatched again
    assert item.rejections == 0 and not item.failures  # no attempt of the agent spent
    assert state.in_flight() == []


def test_an_attempt_that_served_a_hit_and_failed_for_good_dropped_it() -> None:
    failed = ItemFailed(
        component_id="store",
        phase=Phase.CONTRACT,
        attempt=1,
        error_class="permanent",
        error_type="rejected",
        decision="retry",
    )
    assert folded(dispatched(), failed).item("store", Phase.CONTRACT).cache == "dropped"
    transient = failed.model_copy(update={"error_class": "transient"})
    item = folded(dispatched(), transient).item("store", Phase.CONTRACT)
    assert item.cache == "" and item.cached is None  # the next attempt asks the cache again


def test_old_logs_without_cache_fields_fold_as_before() -> None:
    raw = dispatched(cached=None).model_dump(mode="json")
    for field in ("action_key", "cached"):
        raw.pop(field)
    event = ItemDispatched.model_validate(raw)
    item = folded(event, succeeded()).item("store", Phase.CONTRACT)
    assert item.status is ItemStatus.DONE and item.cache == "" and item.action_key == ""
