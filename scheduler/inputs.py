"""What each attempt gets to see, assembled from verified outputs in the store.

The adversarial split is enforced here, by what is put in the task: the code
author's and integrator's inputs never hold the contract tests (those go to
``verify_inputs``, read only by the harness), and the test author never gets
an implementation.
"""

from __future__ import annotations

import json

from pact_workers.artifacts import ArtifactStore, Bundle
from pact_workers.errors import ArtifactError, VerificationError
from pact_workers.models.testing import ContractTestSuite
from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import Phase
from scheduler.interview.recorded import INTERVIEW_INPUT
from scheduler.state import RunState, final_phase

#: Specs made so far, by (component, its dependencies), with the tree they were made
#: from: a component's spec goes into each of its dispatches (three or more), and
#: pretty-printing it is the slow part of assembling inputs. Bounded.
_SPECS: dict[tuple[str, tuple[str, ...]], tuple[DecompositionTree, bytes]] = {}
_SPECS_KEPT = 4096


def component_spec(state: RunState, component_id: str) -> Bundle:
    tree = state.tree
    assert tree is not None
    deps = state.dependencies.get(component_id, [])
    key = (component_id, tuple(deps))
    made = _SPECS.get(key)
    if made is not None and made[0] is tree:
        return {"component.json": made[1]}
    node = tree.nodes[component_id]
    spec = {
        "component_id": node.component_id,
        "name": node.name,
        "description": node.description,
        "parent_id": node.parent_id,
        "children": [
            {
                "component_id": c,
                "name": tree.nodes[c].name,
                "description": tree.nodes[c].description,
            }
            for c in node.children
        ],
        "dependencies": deps,
    }
    data = json.dumps(spec, indent=2, sort_keys=True).encode()
    if len(_SPECS) >= _SPECS_KEPT:
        _SPECS.clear()
    _SPECS[key] = (tree, data)
    return {"component.json": data}


def implementation_closure(state: RunState, component_id: str) -> list[str]:
    """Every component whose implementation ``component_id`` imports, transitively."""
    assert state.tree is not None
    seen: dict[str, None] = {}
    todo = [*state.dependencies.get(component_id, []), *state.tree.nodes[component_id].children]
    while todo:
        cid = todo.pop()
        if cid in seen or cid == component_id:
            continue
        seen[cid] = None
        todo.extend(state.dependencies.get(cid, []))
        todo.extend(state.tree.nodes[cid].children)
    return sorted(seen)


def build_inputs(
    state: RunState,
    store: ArtifactStore,
    component_id: str,
    phase: Phase,
    *,
    lessons: list[str] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """Return (agent inputs, harness-only inputs) as bundle digests by name.

    ``lessons``: what earlier runs learned (retrospectives); the authors of an
    implementation or composition get them.
    """
    assert state.tree is not None
    inputs = {"spec": store.put_bundle(component_spec(state, component_id))}
    verify: dict[str, str] = {}
    deps = state.dependencies.get(component_id, [])
    if phase is Phase.CONTRACT:
        inputs["dep_contracts"] = _contracts(state, store, deps)
        if state.interview:
            # The task's answered interview (``pact plan``): the contract authors see it.
            inputs[INTERVIEW_INPUT] = state.interview
        return inputs, verify
    inputs["contract"] = _output(state, component_id, Phase.CONTRACT)
    related = (
        [*deps, *state.tree.nodes[component_id].children] if phase is Phase.INTEGRATE else deps
    )
    inputs["dep_contracts"] = _contracts(state, store, list(dict.fromkeys(related)))
    if phase is Phase.TEST:
        return inputs, verify
    deps_src = closure_sources(state, store, component_id)
    inputs["deps_src"] = deps_src
    cases = _test_cases(state, store, component_id)
    if cases is not None:
        inputs["test_cases"] = cases
    verify["tests"] = _output(state, component_id, Phase.TEST)
    verify["deps_src"] = deps_src
    if lessons:
        inputs["lessons"] = store.put_bundle({"lessons.json": json.dumps(lessons).encode()})
    return inputs, verify


def _output(state: RunState, component_id: str, phase: Phase) -> str:
    output = state.item(component_id, phase).output
    if output is None:
        raise VerificationError(f"component {component_id!r}: {phase.value} has no output yet")
    return output


def _contracts(state: RunState, store: ArtifactStore, components: list[str]) -> str:
    # Bundles are assembled from manifests (path -> blob digest): the files are already
    # in the store, so nothing is read, hashed or written again but the new manifest.
    manifest: dict[str, str] = {}
    for cid in components:
        item = state.item(cid, Phase.CONTRACT)
        if item.output is not None:
            manifest[f"{cid}/interface.json"] = _file(store, item.output, "interface.json")
    return store.put_manifest(manifest)


def _file(store: ArtifactStore, bundle: str, path: str) -> str:
    digest = store.get_manifest(bundle).get(path)
    if digest is None:
        raise ArtifactError(f"bundle {bundle}: has no {path}")
    return digest


def closure_sources(state: RunState, store: ArtifactStore, component_id: str) -> str:
    """The bundle of every implementation ``component_id`` imports (``deps_src``): the
    verified outputs of its implementation closure, merged.

    Raises:
        VerificationError: two components provide the same path with different files.
    """
    merged: dict[str, str] = {}
    owner: dict[str, str] = {}
    assert state.tree is not None
    for cid in implementation_closure(state, component_id):
        files = store.get_manifest(_output(state, cid, final_phase(state.tree, cid)))
        for path, digest in files.items():
            if path in merged and merged[path] != digest:
                raise VerificationError(
                    f"component {component_id!r}: {path} is provided by both "
                    f"{owner[path]!r} and {cid!r}"
                )
            merged[path] = digest
            owner[path] = cid
    return store.put_manifest(merged)


def _test_cases(state: RunState, store: ArtifactStore, component_id: str) -> str | None:
    """The test suite's list of cases without its code (what the code author may know)."""
    tests = store.get_bundle(_output(state, component_id, Phase.TEST))
    raw = tests.get("tests/contract_test_suite.json")
    if raw is None:
        return None
    suite = ContractTestSuite.model_validate_json(raw).model_copy(update={"generated_code": ""})
    return store.put_bundle({"suite.json": suite.model_dump_json(indent=2).encode()})
