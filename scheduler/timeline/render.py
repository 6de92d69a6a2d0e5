"""Drawing a :class:`RunPicture` as a Gantt chart with matplotlib (no display, no
browser, no network): ``.svg`` and ``.png`` straight from matplotlib, ``.html`` as a
page holding the SVG inline plus a table of the attempts.

Every bar is its own SVG group with the id ``bar-<component>-<phase>-<attempt>``; the
page's script reads each bar's rendered size into the table, so what the browser drew
can be checked (and hovering a row highlights its bar).
"""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pact_workers.files import atomic_write
from pact_workers.models.work import Phase
from scheduler.timeline.bars import Outcome, RunPicture

#: Fill colour per phase.
PHASE_COLOURS: dict[Phase, str] = {
    Phase.CONTRACT: "#4e79a7",
    Phase.TEST: "#59a14f",
    Phase.IMPLEMENT: "#f28e2b",
    Phase.INTEGRATE: "#b07aa1",
}

#: Hatching and edge colour per outcome (a succeeded attempt is plain).
OUTCOME_STYLES: dict[Outcome, tuple[str, str]] = {
    "succeeded": ("", "#333333"),
    "retried": ("//", "#d62728"),
    "lost": ("xx", "#7f0000"),
    "failed": ("xx", "#d62728"),
    "dropped": ("..", "#7f7f7f"),
    "running": ("--", "#333333"),
}

FORMATS = (".svg", ".png", ".html")


def summary_line(pic: RunPicture) -> str:
    """Makespan against the lower bound, in words."""
    return pic.summary()


def figure(pic: RunPicture) -> Figure:
    """The Gantt chart: one lane per worker slot, one bar per attempt."""
    lanes = pic.lanes or ["(none)"]
    height = max(2.5, 0.45 * len(lanes) + 1.6)
    fig = Figure(figsize=(12, height), layout="constrained")
    ax = fig.add_subplot()
    row = {lane: i for i, lane in enumerate(lanes)}
    min_width = pic.makespan_s / 2000 if pic.makespan_s else 0.001
    ends = [0.0]
    for bar in pic.bars:
        hatch, edge = OUTCOME_STYLES[bar.outcome]
        width = max(bar.duration_s, min_width)
        # A rectangle per bar, added without updating the data limits each time (what
        # barh does per call: most of the time of a picture of 30,000 attempts); the
        # limits are set once below.
        ax.add_artist(
            Rectangle(
                (bar.start_s, row[bar.lane] - 0.35),
                width,
                0.7,
                facecolor=PHASE_COLOURS[bar.phase],
                edgecolor="black" if bar.critical else edge,
                linewidth=2.2 if bar.critical else 0.8,
                hatch=hatch,
                gid=bar.bar_id,
            )
        )
        ends.append(bar.start_s + width)
    ax.set_xlim(0.0, max(ends) * 1.05 or 1.0)
    ax.set_ylim(len(lanes) - 0.5, -0.5)  # the first lane on top
    ax.set_yticks(range(len(lanes)), labels=lanes)
    ax.set_xlabel("seconds since the run started")
    ax.set_title(f"run {pic.run_id}: {summary_line(pic)}", fontsize=9, loc="left")
    handles = [Patch(facecolor=c, label=p.value) for p, c in PHASE_COLOURS.items()]
    handles += [
        Patch(facecolor="white", hatch=h, edgecolor=e, label=o)
        for o, (h, e) in OUTCOME_STYLES.items()
        if o != "succeeded" and any(b.outcome == o for b in pic.bars)
    ]
    handles.append(
        Patch(facecolor="white", edgecolor="black", linewidth=2.2, label="critical path")
    )
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return fig


def svg_text(pic: RunPicture) -> str:
    buffer = io.StringIO()
    figure(pic).savefig(buffer, format="svg")
    text = buffer.getvalue()
    # The XML prologue and DOCTYPE do not belong inside an HTML page.
    return text[text.find("<svg") :]


_SCRIPT = """
const rows = document.querySelectorAll("#attempts tbody tr");
let drawn = 0;
for (const row of rows) {
  const group = document.getElementById(row.dataset.bar);
  const box = group ? group.getBBox() : null;
  const cell = row.querySelector(".drawn");
  if (box && box.width > 0 && box.height > 0) {
    drawn += 1;
    cell.textContent = box.width.toFixed(1) + " x " + box.height.toFixed(1);
  } else {
    cell.textContent = "not drawn";
  }
  row.addEventListener("mouseenter", () => group && (group.style.opacity = 0.4));
  row.addEventListener("mouseleave", () => group && (group.style.opacity = 1));
}
document.getElementById("drawn").textContent = drawn + " of " + rows.length + " bars drawn";
"""


def html_text(pic: RunPicture) -> str:
    rows = "\n".join(
        f'<tr data-bar="{html.escape(b.bar_id)}"><td>{html.escape(b.component_id)}</td>'
        f"<td>{b.phase.value}</td><td>{b.attempt}</td><td>{html.escape(b.lane)}</td>"
        f"<td>{b.outcome}</td><td>{b.start_s:.2f}</td><td>{b.duration_s:.2f}</td>"
        f'<td>{"yes" if b.critical else ""}</td><td class="drawn"></td></tr>'
        for b in pic.bars
    )
    data = json.dumps(pic.model_dump(mode="json")).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>pact run {html.escape(pic.run_id)}</title>
<style>body{{font-family:sans-serif;margin:1em}}td,th{{padding:2px 8px;text-align:left}}
tr:hover{{background:#eee}}</style></head>
<body>
<h1>run {html.escape(pic.run_id)}</h1>
<p id="summary">{html.escape(summary_line(pic))}</p>
<div id="chart">{svg_text(pic)}</div>
<p id="drawn"></p>
<table id="attempts"><thead><tr><th>component</th><th>phase</th><th>attempt</th>
<th>lane</th><th>outcome</th><th>start (s)</th><th>duration (s)</th><th>critical</th>
<th>drawn</th></tr></thead><tbody>
{rows}
</tbody></table>
<script type="application/json" id="picture">{data}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_picture(pic: RunPicture, output: Path) -> None:
    """Write ``pic`` to ``output`` in the format its suffix names (atomically).

    Raises:
        ValueError: the suffix is not one of :data:`FORMATS`.
    """
    suffix = output.suffix.lower()
    if suffix == ".html":
        data = html_text(pic).encode()
    elif suffix in (".svg", ".png"):
        buffer = io.BytesIO()
        figure(pic).savefig(buffer, format=suffix[1:], dpi=110)
        data = buffer.getvalue()
    else:
        raise ValueError(f"{output}: unknown picture format {suffix!r}; use one of {FORMATS}")
    atomic_write(output, data, fsync=False)
