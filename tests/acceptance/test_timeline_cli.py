"""``pact timeline`` as a user runs it: the picture of ``pact demo`` in each format, the
HTML page rendered by a real headless browser (Chromium), ``pact status`` naming the
latest picture, and bad output paths refused before anything is written."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.test_provenance_cli import pact
from tests.conftest import require_service


def chromium() -> str:
    """The headless browser (Debian's ``chromium`` package; scripts/ensure-services
    installs it)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    require_service("chromium", "no chromium binary is on PATH")
    raise AssertionError("unreachable")


def rendered_dom(page: Path, tmp_path: Path) -> str:
    """The page's DOM after Chromium loaded it and ran its script."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # the tests may run as root, where the sandbox refuses
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("timeline") / "demo"
    assert pact("demo", str(project)).returncode == 0
    return project


def test_the_html_picture_renders_every_bar_in_headless_chromium(
    demo: Path, tmp_path: Path
) -> None:
    project = demo
    page = tmp_path / "run.html"
    drawn = pact("timeline", str(project), "-o", str(page))
    assert drawn.returncode == 0, drawn.stderr
    attempts = int(re.search(r"(\d+) attempts on (\d+) lanes", drawn.stdout).group(1))  # type: ignore[union-attr]
    assert attempts == 32  # 30 items, a retried implementation, a transient retry
    assert "against a lower bound of" in drawn.stdout
    dom = rendered_dom(page, tmp_path)
    assert f'id="drawn">{attempts} of {attempts} bars drawn<' in dom
    sizes = re.findall(r'class="drawn">([0-9.]+) x ([0-9.]+)<', dom)
    assert len(sizes) == attempts and all(float(w) > 0 and float(h) > 0 for w, h in sizes)
    assert "<td>retried</td>" in dom
    status = pact("status", str(project))
    assert f"timeline: {page.resolve()}" in status.stdout
    report = json.loads(pact("status", str(project), "--json").stdout)["provenance"]
    assert report["timeline"] == str(page.resolve())


def test_svg_and_png_pictures(demo: Path, tmp_path: Path) -> None:
    project = demo
    svg, png = tmp_path / "run.svg", tmp_path / "run.png"
    assert pact("timeline", str(project), "-o", str(svg)).returncode == 0
    assert pact("timeline", str(project), "--output", str(png)).returncode == 0
    assert svg.read_text().count('<g id="bar-') == 32
    assert png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("run.pdf", "unknown picture format '.pdf'"),
        ("run", "unknown picture format '(none)'"),
        ("missing/run.svg", "missing: no such directory"),
    ],
)
def test_bad_outputs_are_refused_and_nothing_is_written(
    demo: Path, tmp_path: Path, output: str, words: str
) -> None:
    project = demo
    record = (
        (project / ".pact" / "timeline.json").read_bytes()
        if (project / ".pact" / "timeline.json").exists()
        else None
    )
    before = sorted(p.name for p in (project / ".pact").iterdir())
    refused = pact("timeline", str(project), "-o", str(tmp_path / output))
    assert refused.returncode == 2
    assert words in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(p.name for p in (project / ".pact").iterdir()) == before
    assert not (tmp_path / output).exists()
    if record is not None:
        assert (project / ".pact" / "timeline.json").read_bytes() == record


def test_a_directory_without_a_run_is_refused(tmp_path: Path) -> None:
    refused = pact("timeline", str(tmp_path), "-o", str(tmp_path / "x.svg"))
    assert refused.returncode == 2 and "no pact run here" in refused.stderr
