"""The action key: one digest of everything that decides a work item's verified result.

Two work items with the same key ask the same question of the same agent, in the same
environment, against the same inputs; the result the harness accepted for one answers
the other. What goes into the key, and why:

- **the component as the tree gives it**: its id, name, description, parent, children
  (ids), and its dependencies as the tree declares them and as the run knows them
  (contracts add some). Its place in the tree (``depth``) is not what it is asked;
- **the phase and the role**;
- **what serves the role, as far as it shapes the answer**: the backend, the model,
  the server (``base_url``: two servers may serve different models by one name),
  ``max_tokens``, a command agent's argv, files_dir, network and passed-through
  variable names, and for the code author and integrator the trace analyst too (its
  diagnosis shapes a retry). Never a key, nor what only decides how a call is made
  (``api_key_env``, timeouts, retries). The replay agent's model is the content of its
  directory (every file, replay.yaml included); the noop agent's is its own code;
- **the role's prompt**: its version and a digest of its text (an edited prompt is a
  new prompt even if nobody bumped its version);
- **the environment**: the sandbox kind and the environment spec, and under Docker the
  sandbox image they name (spec, Dockerfile and base image, as ``image_tag`` makes it);
- **the digests of the inputs**: those the agent sees (its spec, its contract, its
  dependencies' contracts and sources) and those only the harness sees (the contract
  tests). A dependency whose contract or code differed changes them, so anything
  upstream that differed gives another key.

Left out on purpose: the run id, the attempt number, earlier attempts' feedback and
the lessons of earlier runs' retrospectives (input ``lessons``: how an accepted answer
was reached does not change what it answers; the harness judges it against the same
contract and tests), prices (they change what a call costs, not what it returns),
verification timeouts, retry settings and where the project lives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pact_workers.agents.roles import load_template, prompt_version
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import ROLE_FOR_PHASE, Phase, Role
from scheduler.cache.base import CacheError

__all__ = [
    "KEY_VERSION",
    "TRANSPORT_FIELDS",
    "KeyBasis",
    "action_key",
    "directory_digest",
    "key_basis",
    "key_document",
]

#: Bumped whenever what goes into a key changes, so that old entries are never hit.
KEY_VERSION = 1

#: Agent settings that decide how a call is made, not what it answers.
TRANSPORT_FIELDS = frozenset({"api_key_env", "idle_timeout_s", "max_retries", "timeout_s"})

#: Roles whose retries carry the trace analyst's diagnosis.
_ANALYSED = frozenset({Role.CODE_AUTHOR, Role.INTEGRATOR})


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class KeyBasis:
    """What every key of one run shares: per role, the agent and its prompt; the
    environment. Built once per run (and again when a resume changes the agent)."""

    roles: Mapping[Role, Mapping[str, Any]]
    environment: Mapping[str, Any]


def key_basis(
    agent: str,
    options: Mapping[str, str],
    *,
    environment: EnvironmentSpec,
    sandbox: str,
) -> KeyBasis:
    """The basis of a run's keys.

    Raises:
        CacheError: the agent cannot be identified (a replay directory that cannot be
            read, options without the role's configuration): such a run cannot use the
            cache, since a key that misses part of what decides the answer could hit
            a wrong result.
    """
    agent = agent or "replay"
    shared: dict[str, Any] | None = None
    if agent == "replay":
        directory = options.get("replay_dir")
        if not directory:
            raise CacheError("the replay agent names no directory")
        shared = {"backend": "replay", "content": directory_digest(Path(directory))}
    elif agent == "noop":
        shared = {"backend": "noop", "code": _noop_code()}
    configs = {} if shared is not None else _role_configs(options)
    roles: dict[Role, Mapping[str, Any]] = {}
    for role in ROLE_FOR_PHASE.values():
        served = shared if shared is not None else _served(configs, role)
        roles[role] = {"agent": served, "prompt": _prompt(role)}
    return KeyBasis(roles=roles, environment=_environment(environment, sandbox))


#: Inputs that advise the agent but do not define its work (see the module docstring).
ADVISORY_INPUTS = frozenset({"lessons"})


def key_document(
    basis: KeyBasis,
    *,
    tree: DecompositionTree,
    dependencies: Mapping[str, Sequence[str]],
    component_id: str,
    phase: Phase,
    inputs: Mapping[str, str],
    verify_inputs: Mapping[str, str],
) -> dict[str, Any]:
    """Everything the key of one work item is the digest of (see the module docstring)."""
    node = tree.nodes[component_id]
    role = ROLE_FOR_PHASE[phase]
    return {
        "version": KEY_VERSION,
        "component": {
            "component_id": node.component_id,
            "name": node.name,
            "description": node.description,
            "parent_id": node.parent_id,
            "children": list(node.children),
            "declared_dependencies": list(node.dependencies),
            "dependencies": list(dependencies.get(component_id, ())),
        },
        "phase": phase.value,
        "role": role.value,
        **basis.roles[role],
        "environment": basis.environment,
        "inputs": {k: v for k, v in inputs.items() if k not in ADVISORY_INPUTS},
        "verify_inputs": dict(verify_inputs),
    }


def action_key(
    basis: KeyBasis,
    *,
    tree: DecompositionTree,
    dependencies: Mapping[str, Sequence[str]],
    component_id: str,
    phase: Phase,
    inputs: Mapping[str, str],
    verify_inputs: Mapping[str, str],
) -> str:
    """``sha256:<hex>`` of :func:`key_document`'s canonical JSON."""
    return _sha256(
        canonical(
            key_document(
                basis,
                tree=tree,
                dependencies=dependencies,
                component_id=component_id,
                phase=phase,
                inputs=inputs,
                verify_inputs=verify_inputs,
            )
        )
    )


def directory_digest(root: Path) -> str:
    """A digest of every file under ``root`` (paths and bytes), as the replay agent
    sees them: ``__pycache__`` left out, links followed. A link that leaves the
    directory (which the agent refuses to serve) counts by where it points.

    Raises:
        CacheError: the directory cannot be read.
    """
    digest = hashlib.sha256()
    try:
        base = root.resolve(strict=True)
        paths = sorted(p for p in root.rglob("*") if "__pycache__" not in p.parts and p.is_file())
        for path in paths:
            real = path.resolve()
            data = path.read_bytes() if real.is_relative_to(base) else f"-> {real}".encode()
            for part in (path.relative_to(root).as_posix().encode(), data):
                digest.update(len(part).to_bytes(8, "big"))
                digest.update(part)
    except OSError as exc:
        raise CacheError(f"replay directory {root}: cannot be read ({exc})") from exc
    return "sha256:" + digest.hexdigest()


def _role_configs(options: Mapping[str, str]) -> dict[str, Any]:
    try:
        configs = json.loads(options.get("roles", "{}"))
    except ValueError as exc:
        raise CacheError(f"the run's agent options are malformed: {exc}") from exc
    if not isinstance(configs, dict):
        raise CacheError("the run's agent options are malformed: roles is not a mapping")
    return configs


def _served(configs: Mapping[str, Any], role: Role) -> dict[str, Any]:
    config = configs.get(role.value)
    if not isinstance(config, dict):
        raise CacheError(f"the run's agent options do not say what serves {role.value}")
    served = {k: v for k, v in config.items() if k not in TRANSPORT_FIELDS}
    if served.get("backend") == "noop":
        served["code"] = _noop_code()
    analyst = configs.get(Role.TRACE_ANALYST.value)
    if role in _ANALYSED and isinstance(analyst, dict):
        served["analyst"] = {
            **{k: v for k, v in analyst.items() if k not in TRANSPORT_FIELDS},
            "prompt": _prompt(Role.TRACE_ANALYST),
        }
    return served


def _prompt(role: Role) -> dict[str, str]:
    return {"version": prompt_version(role), "text": _sha256(load_template(role).encode())}


def _noop_code() -> str:
    return _sha256(resources.files("pact_workers.agents").joinpath("noop.py").read_bytes())


def _environment(spec: EnvironmentSpec, sandbox: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"sandbox": sandbox or "local", "spec": spec.model_dump(mode="json")}
    if doc["sandbox"] == "docker":
        from pact_workers.sandbox.images import default_base_image, dockerfile_bytes, image_tag

        # The image the workers build for this spec. Its base is named, not its image
        # id (only the engine knows that); rebuilding a base under the same name is
        # what `cache: verify` catches.
        doc["image"] = image_tag(spec, dockerfile_bytes(), default_base_image())
    return doc
