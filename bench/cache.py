"""Action cache benchmark: a batch of similar trees with the cache against without.

A batch of ``--trees`` trees (10) of ``--components`` components (20) each, sharing
``--shared`` (80%) of their components: every tree has the same library subtree
(``bench.trees.synthetic_tree``, renamed ``lib``) and a feature subtree and root of
its own (the root differs because its children do). The trees run one after another,
each into a project directory of its own, through the real run loop
(:class:`~scheduler.run.RunController`), the local executor, the local sandbox (real
verifications) and the replay agent serving a generated replay directory, whose
calls take ``--latency-s`` (0.2 s) and bill a fixed usage per role. The batch runs
three times: ``cache: off``, ``cache: verify`` and ``cache: trust``, each with a cache
directory of its own that starts empty.

Printed side by side: agent calls, their share of the uncached run's (target for
``verify``: <= 30%), wall time and its ratio, the money spent and the money the hits
saved. Agent calls are counted at the agent; wall time is a measurement (the only
noisy column).

Usage::

    python bench/cache.py [--trees 10] [--components 20] [--shared 0.8]
        [--latency-s 0.2] [--workers 4] [--json] [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.trees import synthetic_tree  # noqa: E402
from pact_workers.agents.base import AgentOutput, AgentRequest  # noqa: E402
from pact_workers.agents.replay import ReplayAgent  # noqa: E402
from pact_workers.models.tree import DecompositionTree, tree_from_data  # noqa: E402
from pact_workers.sandbox.local import LocalSandbox  # noqa: E402
from scheduler.audit import read_events  # noqa: E402
from scheduler.cache import DirectoryActionCache  # noqa: E402
from scheduler.commands.runs import drive_run  # noqa: E402
from scheduler.events import CacheHit  # noqa: E402
from scheduler.launch import start_run  # noqa: E402
from scheduler.project import ProjectDir  # noqa: E402
from scheduler.settings import Settings  # noqa: E402
from scheduler.state import RunStatus  # noqa: E402

MODES = ("off", "verify", "trust")
#: The target: a batch with the cache makes at most this share of the uncached calls.
MAX_CALL_SHARE = 0.30
#: What each agent call bills (replay.yaml's usage per role).
USAGE = {"input_tokens": 4000, "output_tokens": 1500, "cost_usd": 0.0345}


def batch(trees: int, components: int, shared: float) -> list[dict[str, Any]]:
    """``trees`` trees of ``components`` components, ``shared`` of them in every tree.

    Tree k: the root ``app`` with two children, the library ``lib`` (the shared
    components, with the sibling dependencies ``synthetic_tree`` gives them) and the
    feature ``feature_k`` (the rest but the root, a chain of leaves whose first
    depends on a library leaf).
    """
    library = max(1, round(components * shared))
    own = components - library - 1  # the root is the tree's own too
    if own < 1:
        raise ValueError("each tree needs at least a root and a feature of its own")
    lib = synthetic_tree(library, branching=4)["nodes"]
    rename = {cid: ("lib" if cid == "c0" else f"lib_{cid[1:]}") for cid in lib}
    lib_nodes = {
        rename[cid]: {
            "component_id": rename[cid],
            "name": node["name"].replace("C", "Lib ", 1),
            "description": f"library component {rename[cid]}",
            "parent_id": rename.get(node["parent_id"], "app"),
            "children": [rename[c] for c in node["children"]],
            "dependencies": [rename[d] for d in node["dependencies"]],
        }
        for cid, node in lib.items()
    }
    lib_leaf = next(cid for cid, node in sorted(lib_nodes.items()) if not node["children"])
    out = []
    for k in range(trees):
        feature = f"feature_{k}"
        leaves = [f"{feature}_{i}" for i in range(1, own)]
        nodes: dict[str, Any] = {
            "app": {
                "component_id": "app",
                "name": "App",
                "description": "the application",
                "children": ["lib", feature],
            },
            **lib_nodes,
            feature: {
                "component_id": feature,
                "name": f"Feature {k}",
                "description": f"feature {k} of the application",
                "parent_id": "app",
                "children": leaves,
            },
        }
        for i, leaf in enumerate(leaves):
            nodes[leaf] = {
                "component_id": leaf,
                "name": f"Feature {k} part {i + 1}",
                "description": f"part {i + 1} of feature {k}",
                "parent_id": feature,
                "dependencies": [leaves[i - 1] if i else lib_leaf],
            }
        out.append({"root_id": "app", "nodes": nodes})
    return out


def write_replay(directory: Path, trees: list[DecompositionTree], latency_s: float) -> None:
    """A replay directory that answers for every component of ``trees``: the smallest
    contract, test suite and module each role's harness accepts."""
    for cid in sorted({cid for tree in trees for cid in tree.nodes}):
        base = directory / cid
        (base / "tests").mkdir(parents=True)
        (base / "src").mkdir()
        contract = {"component_id": cid, "name": cid, "description": f"{cid} (bench)"}
        (base / "interface.json").write_text(json.dumps(contract))
        (base / "tests" / "contract_test.py").write_text(
            f"import {cid}\n\n\ndef test_{cid}_exists():\n    assert {cid}.READY\n"
        )
        (base / "src" / f"{cid}.py").write_text("READY = True\n")
    roles = ("contract_author", "test_author", "code_author", "integrator")
    script = {
        "usage": dict.fromkeys(roles, USAGE),
        "latency_s": dict.fromkeys(roles, latency_s),
    }
    (directory / "replay.yaml").write_text(json.dumps(script))


class CountingReplay(ReplayAgent):
    """The replay agent, counting the calls made to it."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.count = 0
        self._count_lock = threading.Lock()

    def produce(self, request: AgentRequest) -> AgentOutput:
        with self._count_lock:
            self.count += 1
        return super().produce(request)


@dataclass
class BatchResult:
    mode: str
    runs: int
    completed: int
    items: int
    agent_calls: int
    hits: int
    wall_s: float
    cost_usd: float
    saved_usd: float


def run_batch(
    trees: list[DecompositionTree], replay: Path, root: Path, *, mode: str, workers: int
) -> BatchResult:
    """Every tree of the batch, one after another, each into a project of its own,
    all with one cache directory (empty at the start)."""
    cache = DirectoryActionCache(root / "cache")
    settings = Settings.model_validate({"cache": mode})
    agent = CountingReplay(replay)
    result = BatchResult(mode, len(trees), 0, 0, 0, 0, 0.0, 0.0, 0.0)
    started = time.perf_counter()
    for i, tree in enumerate(trees):
        project = ProjectDir(root / f"project-{i}")
        start_run(
            project,
            tree,
            tree_bytes=json.dumps(tree.model_dump(mode="json")).encode(),
            settings=settings,
            agent="replay",
            agent_options={"replay_dir": str(replay)},
        )
        state = drive_run(
            project=project,
            settings=settings,
            agent=agent,
            sandbox=LocalSandbox(),
            workers=workers,
            cache=cache,
        )
        events, _ = read_events(project.audit_path)
        hits = [e for e in events if isinstance(e, CacheHit)]
        result.completed += state.status is RunStatus.COMPLETED
        result.items += len(state.items)
        result.hits += len(hits)
        result.cost_usd += state.usage.cost_usd
        result.saved_usd += sum(h.saved.cost_usd for h in hits)
    result.wall_s = time.perf_counter() - started
    result.agent_calls = agent.count
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print it.

    Returns:
        0, or 1 when a run did not complete (a bug), or when ``--check`` is given and
        the batch with ``cache: verify`` makes more than 30% of the uncached calls.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--components", type=int, default=20)
    parser.add_argument("--shared", type=float, default=0.8)
    parser.add_argument("--latency-s", type=float, default=0.2, help="seconds per agent call")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target fails")
    args = parser.parse_args(argv)

    docs = batch(args.trees, args.components, args.shared)
    trees = [tree_from_data(doc, f"<bench tree {i}>") for i, doc in enumerate(docs)]
    shared = len(set.intersection(*(set(t.nodes) for t in trees))) - 1  # not the root
    results: dict[str, BatchResult] = {}
    with tempfile.TemporaryDirectory(prefix="pact-bench-cache-") as tmp:
        replay = Path(tmp) / "replay"
        write_replay(replay, trees, args.latency_s)
        for mode in MODES:
            results[mode] = run_batch(
                trees, replay, Path(tmp) / mode, mode=mode, workers=args.workers
            )
            if sys.stderr.isatty():
                print(f"cache: {mode} done", file=sys.stderr)
    base = results["off"]
    share = {m: r.agent_calls / base.agent_calls for m, r in results.items()}
    ok = all(r.completed == r.runs for r in results.values())
    met = share["verify"] <= MAX_CALL_SHARE
    if args.json:
        doc = {
            "trees": args.trees,
            "components": args.components,
            "shared_components": shared,
            "latency_s": args.latency_s,
            "workers": args.workers,
            "target_max_call_share": MAX_CALL_SHARE,
            "results": {m: {**asdict(r), "call_share": share[m]} for m, r in results.items()},
        }
        print(json.dumps(doc, indent=2))
    else:
        print(
            f"{args.trees} trees of {args.components} components, {shared} of them in every "
            f"tree ({shared / args.components:.0%}); agent calls take {args.latency_s} s; "
            f"{args.workers} workers, local sandbox"
        )
        header = (
            f"{'cache':<7} {'runs ok':>7} {'items':>6} {'agent calls':>11} {'share':>6} "
            f"{'hits':>5} {'wall s':>7} {'wall ratio':>10} {'spent $':>8} {'saved $':>8}"
        )
        print(header)
        for mode, r in results.items():
            print(
                f"{mode:<7} {r.completed:>4}/{r.runs:<2} {r.items:>6} {r.agent_calls:>11} "
                f"{share[mode]:>6.0%} {r.hits:>5} {r.wall_s:>7.1f} "
                f"{r.wall_s / base.wall_s:>10.2f} {r.cost_usd:>8.2f} {r.saved_usd:>8.2f}"
            )
        verdict = "met" if met else "NOT met"
        print(
            f"target: cache: verify makes <= {MAX_CALL_SHARE:.0%} of the uncached agent calls: "
            f"{share['verify']:.0%}, {verdict}"
        )
    if not ok:
        return 1
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
