"""One self-contained HTML page: the per-operator profile as an SVG bar chart, the footprint
as stacked RAM and flash bars, and the run's metadata. No network, no JavaScript: the page
is read as it is, attached to a CI run or mailed."""

from __future__ import annotations

import datetime
import html
import platform
from typing import Any, Dict, List, Optional, Sequence, Tuple

PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295",
)  # fmt: skip

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
td:first-child, th:first-child { text-align: left; }
table.calls td:nth-child(2), table.calls th:nth-child(2), table.footprint td:nth-child(2) {
  text-align: left; }
table.calls td:nth-child(2) { font: 12px ui-monospace, monospace; white-space: normal;
  word-break: break-all; }
.meta td { text-align: left; }
.note { color: #555; }
svg text { font: 12px system-ui, sans-serif; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _bytes(value: Optional[int]) -> str:
    return "-" if value is None else f"{int(value):,}"


def bar_chart(rows: Sequence[Tuple[str, float, str]], *, width: int = 1000) -> str:
    """Horizontal bars: (label, value, caption at the bar's end) per row."""
    label_width, bar_height, gap = 360, 18, 6
    top = max((value for _, value, _ in rows), default=0.0) or 1.0
    span = width - label_width - 250
    height = len(rows) * (bar_height + gap) + gap
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" class="bars">'
    ]
    for i, (label, value, caption) in enumerate(rows):
        y = gap + i * (bar_height + gap)
        length = max(1.0, span * value / top)
        short = label if len(label) <= 46 else label[:21] + "…" + label[-24:]
        parts.append(
            f'<text x="{label_width - 8}" y="{y + 13}" text-anchor="end">{_e(short)}'
            f"<title>{_e(label)}</title></text>"
            f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{bar_height}" '
            f'fill="{PALETTE[i % len(PALETTE)]}"><title>{_e(label)}: {_e(caption)}</title></rect>'
            f'<text x="{label_width + length + 6:.1f}" y="{y + 13}">{_e(caption)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def stacked_bar(title: str, parts: Sequence[Tuple[str, int]], available: Optional[int]) -> str:
    """One bar split into ``parts`` (name, bytes), with a legend; the caption says how much
    of the board's memory they take."""
    width, bar_height = 1000, 28
    used = sum(size for _, size in parts)
    scale = used or 1  # the parts' proportions; the caption gives the share of the board
    legend_rows = (len(parts) + 2) // 3
    height = 24 + bar_height + 10 + legend_rows * 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" class="stacked">',
        f'<text x="0" y="14">{_e(title)}: {used:,} B'
        + (f" of {available:,} B ({100 * used / available:.1f} %)" if available else "")
        + "</text>",
    ]
    x = 0.0
    for i, (name, size) in enumerate(parts):
        w = width * size / scale
        out.append(
            f'<rect x="{x:.2f}" y="22" width="{w:.2f}" height="{bar_height}" '
            f'fill="{PALETTE[i % len(PALETTE)]}"><title>{_e(name)}: {size:,} B</title></rect>'
        )
        x += w
    for i, (name, size) in enumerate(parts):
        lx, ly = (i % 3) * 330, 22 + bar_height + 22 + (i // 3) * 20
        out.append(
            f'<rect x="{lx}" y="{ly - 11}" width="12" height="12" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{lx + 18}" y="{ly}">{_e(name)} {size:,} B</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def profile_section(profile: Any) -> str:
    unit = profile.unit
    rows = [
        (f"{c.index}: {c.function}", c.value, f"{_num(c.value)} {unit} ({100 * c.share:.1f} %)")
        for c in profile.calls
    ]
    table_rows = [
        [
            c.index,
            c.function,
            _num(c.value),
            f"{100 * c.share:.2f} %",
            f"{c.workspace_bytes:,}",
            _bytes(c.window_bytes),
            "-" if c.input_bytes is None else f"{c.input_bytes:,}",
            "-" if c.output_bytes is None else f"{c.output_bytes:,}",
        ]
        for c in profile.calls
    ]
    whole = profile.whole
    summary = (
        f"{len(profile.calls)} operator calls sum to {_num(profile.calls_total)} of the whole "
        f"inference's {_num(whole)} {unit}; dispatch and profiling take "
        f"{_num(profile.overhead)} ({100 * profile.overhead / whole if whole else 0:.3f} %)."
    )
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in profile.notes)
    return (
        f"<h2>Per-operator profile: {_e(profile.model)} ({_e(profile.executor)} executor)</h2>"
        f'<p class="summary">{_e(summary)}</p>'
        + bar_chart(rows)
        + _table(
            ["#", "function", unit, "share", "workspace B", "window B", "in B", "out B"],
            table_rows,
            "calls",
        )
        + notes
    )


def footprint_section(report: Any) -> str:
    linked = report.linked is not None

    def parts(rows: Sequence[Tuple[str, Optional[int], Optional[int]]]) -> List[Tuple[str, int]]:
        chosen = [(name, got if linked else planned) for name, planned, got in rows]
        return [(name, int(size)) for name, size in chosen if size]

    stage = "linked" if linked else "planned"
    ram, flash = parts(report.ram_rows()), parts(report.flash_rows())
    table_rows = [["RAM", name, f"{size:,}"] for name, size in ram] + [
        ["flash", name, f"{size:,}"] for name, size in flash
    ]
    plans = [
        [
            p["model"],
            _bytes(p["tvm_plan_bytes"]),
            _bytes(p["planned_bytes"]),
            _bytes(p["lower_bound_bytes"]),
            "-" if p["over_bound_percent"] is None else f"+{p['over_bound_percent']:.2f} %",
        ]
        for p in report.memory_plans()
    ]
    return (
        f"<h2>Footprint ({stage})</h2>"
        f'<p class="summary">{_e(report.verdict())}</p>'
        + stacked_bar(f"RAM ({stage})", ram, report.ram_available)
        + stacked_bar(f"flash ({stage})", flash, report.flash_available)
        + _table(["memory", "what", "bytes"], table_rows, "footprint")
        + "<h3>Memory plan: tensors and workspace (bytes)</h3>"
        + _table(["model", "TVM's plan", "ours", "lower bound", "over bound"], plans, "footprint")
    )


def page(
    title: str,
    *,
    metadata: Dict[str, Any],
    profile: Any = None,
    footprint: Any = None,
) -> str:
    """The whole HTML document."""
    meta = dict(metadata)
    meta.setdefault("python", platform.python_version())
    meta.setdefault(
        "generated", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    )
    sections = []
    if profile is not None:
        sections.append(profile_section(profile))
    if footprint is not None:
        sections.append(footprint_section(footprint))
    meta_rows = [[k, v] for k, v in meta.items() if v not in (None, "")]
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1>" + _table(["", ""], meta_rows, "meta") + "".join(sections)
        + "</body></html>\n"
    )  # fmt: skip


def toolchain_versions(board: Any) -> Dict[str, Optional[str]]:
    """First lines of the compilers' and QEMU's --version, where they apply."""
    import shutil
    import subprocess

    tools = [board.architecture.compiler]
    if board.qemu_binary is not None:
        tools.append(board.qemu_binary)
    found: Dict[str, Optional[str]] = {}
    for tool in tools:
        path = shutil.which(tool)
        if path is None:
            continue
        try:
            out = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=20, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        found[tool] = out.splitlines()[0].strip() if out else None
    return found
