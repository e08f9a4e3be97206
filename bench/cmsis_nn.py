"""Part 20: TVM 0.14's KWS CMSIS-NN archives on every CMSIS-NN release, per core.

For each release tag of the CMSIS-NN repository (``$MLF_PROJECT_CMSIS_NN`` when it names one,
else ``../shared/deps/CMSIS-NN.git``: v4.1.0, 23.08, v5.0.0, 24.02, v6.0.0, v7.0.0), on
qemu-mps3-an547 (Cortex-M55, CMSIS-NN's MVE code) and qemu-mps2-an386 (Cortex-M4, its DSP
code), ``kws_int8_cmsisnn`` (graph) and ``kws_int8_aot_cmsisnn_usmp`` (AOT + USMP) generated,
built and run once on their reference inputs as ``mlf-project run --icount`` does:

- instructions per inference (QEMU ``-icount``, the firmware's SysTick: ±31 on the an547, ±40
  on the an386);
- whether the outputs equal TVM's reference bit for bit, or the release was refused before
  building. A tag the code covers (``RELEASES``) must run exactly: one that ends with other
  outputs (``WRONG``: never a silent wrong answer) or is refused (``REFUSED``) fails the part,
  after every row is measured; only a tag outside ``RELEASES`` may be ``refused``;
- the firmware's RAM (``.data`` + ``.bss`` + stack, ``arm-none-eabi-size``), the model's
  arena (which holds the adapter's scratch: each CMSIS-NN operator's workspace window is
  planned for it) and the adapter's own static RAM (the kept kernel sums, as planned), the
  most one call takes from its window (``scratch_bytes``: this release; ``window_scratch_bytes``:
  as planned, the most any covered release asks).

Targets (issue 37): at most 1.90 M instructions per KWS inference on the an547 and 7.75 M on the
an386 with the fastest exact release, graph and AOT alike; no wrong output anywhere.

``--smoke``: the graph archive with v7.0.0 on the an547.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .common import (
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    corpus_dir,
    generate,
    require_qemu,
    size_berkeley,
)

AN386, AN547 = "qemu-mps2-an386", "qemu-mps3-an547"
BOARDS = (AN547, AN386)
CASES = ("kws_int8_cmsisnn", "aot/kws_int8_aot_cmsisnn_usmp")
TARGETS = {AN547: 1_900_000, AN386: 7_750_000}
SMOKE = ("kws_int8_cmsisnn", AN547, "v7.0.0")
# Outcomes that fail the part: other outputs than TVM's, or a covered tag refused.
FAILURES = ("WRONG", "REFUSED")


def repository() -> Path:
    """The CMSIS-NN git repository whose tags are measured."""
    import os

    from project_api.modelgen.corpus import CMSIS_NN_ENV, shared_cmsis_nn

    from .common import REPO_ROOT

    configured = os.environ.get(CMSIS_NN_ENV)
    if configured and (Path(configured) / "HEAD").is_file():
        return Path(configured)
    shared = shared_cmsis_nn(REPO_ROOT)
    if shared is None:
        raise Skip(
            "no CMSIS-NN git repository (../shared/deps/CMSIS-NN.git, $MLF_PROJECT_CMSIS_NN)"
        )
    return shared


def tags(repo: Path) -> List[str]:
    """The repository's release tags, in release order (those of RELEASES first)."""
    from project_api.cmsis_nn.release import RELEASES

    found = subprocess.run(
        ["git", "-C", str(repo), "tag"], capture_output=True, text=True, check=True
    ).stdout.split()
    known = [r.name for r in RELEASES if r.name in found]
    return known + sorted(t for t in found if t not in known)


def measure(ctx: Context, archive: Path, board: str, repo: Path, tag: str) -> Dict[str, Any]:
    """One firmware: instructions, exact or refused (``REFUSED``: a covered tag), RAM."""
    from project_api.cmsis_nn.release import covered_releases
    from project_api.errors import DependencyError

    dependency = {"short_name": "cmsis-nn", "url": repo.resolve().as_uri(), "url_type": "git",
                  "version_spec": tag}  # fmt: skip
    row: Dict[str, Any] = {"archive": archive.stem, "board": board, "cmsis_nn": tag}
    try:
        project = generate(
            archive,
            ctx.scratch(f"cmsis_nn_{archive.stem}_{board}_{tag}"),
            board=board,
            options={"dependencies": [dependency], "qemu_icount": True,
                     "cache_dir": str(ctx.scratch("cmsis_nn_cache"))},
        )  # fmt: skip
    except DependencyError as refused:
        outcome = "REFUSED" if tag in covered_releases() else "refused"
        return {**row, "outcome": outcome, "why": refused.message}
    project.build()
    inputs = dict(np.load(archive.with_suffix(".inputs.npz")))
    want = np.load(archive.with_suffix(".outputs.npz"))["output0"]
    with project.session(timeout=30, run_timeout=300) as session:
        got = session.run(inputs)["output0"]
        stats = session.last_stats
    assert stats is not None and stats.ticks is not None
    exact = bool(np.array_equal(got, want))
    (cmsis,) = [d for d in project.info["dependencies"] if d["short_name"] == "cmsis-nn"]
    adapter = cmsis.get("adapter") or {}
    (model,) = project.info["models"]
    sizes = size_berkeley(Path(project.firmware))
    return {
        **row,
        "outcome": "exact" if exact else "WRONG",
        "max_diff": int(np.abs(got.astype(int) - want.astype(int)).max()),
        "instructions": int(round(stats.ticks * project.board.instructions_per_tick())),
        "release": cmsis.get("release"),
        "ram_bytes": sizes["data"] + sizes["bss"],
        "arena_bytes": model["sizes"]["arena_bytes"],
        "adapter_ram_bytes": sum(int(v) for v in dict(adapter.get("ram", {})).values()),
        "scratch_bytes": adapter.get("scratch_bytes"),
        "window_scratch_bytes": model["sizes"].get("workspace_cmsis_nn_bytes"),
        "kernel_sum_bytes": adapter.get("kernel_sum_bytes"),
    }


def _best(rows: List[Dict[str, Any]], board: str, stem: str) -> Optional[Dict[str, Any]]:
    exact = [r for r in rows if r["board"] == board and r["archive"] == stem.split("/")[-1]
             and r["outcome"] == "exact"]  # fmt: skip
    return min(exact, key=lambda r: r["instructions"]) if exact else None


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    repo = repository()
    plan = [SMOKE] if ctx.smoke else [
        (stem, board, tag) for stem in CASES for board in BOARDS for tag in tags(repo)
    ]  # fmt: skip
    rows: List[Dict[str, Any]] = []
    for stem, board, tag in plan:
        archive = corpus_dir() / f"{stem}.tar"
        if not archive.is_file():
            raise Skip(f"{stem}.tar is not in the corpus")
        row = measure(ctx, archive, board, repo, tag)
        rows.append(row)
        ctx.log(
            f"  {row['archive']} on {board}, CMSIS-NN {tag}: {row['outcome']}"
            + (f", {row['instructions']:,} instructions" if "instructions" in row else "")
            + (f" (covered: a failure; {row['why']})" if row["outcome"] == "REFUSED" else "")
        )
    result.rows = rows
    failed = [r for r in rows if r["outcome"] in FAILURES]
    found = {
        f"{board} {stem.split('/')[-1]}": _best(rows, board, stem)
        for board in BOARDS
        for stem in CASES
    }
    best = {k: v for k, v in found.items() if v is not None}

    def met(board: str) -> Optional[bool]:
        figures = [v["instructions"] for k, v in best.items() if k.startswith(board)]
        return None if not figures else max(figures) <= TARGETS[board]

    result.summary = {
        "fastest_exact": {
            k: {
                "cmsis_nn": v["cmsis_nn"],
                "instructions": v["instructions"],
                "ram_bytes": v["ram_bytes"],
            }
            for k, v in best.items()
        },  # fmt: skip
        "refused": sorted({r["cmsis_nn"] for r in rows if r["outcome"] == "refused"}),
        "wrong": [r for r in rows if r["outcome"] == "WRONG"],
        "covered_refused": [r for r in rows if r["outcome"] == "REFUSED"],
        "failures": len(failed),
        "an547_target_met": met(AN547),
        "an386_target_met": met(AN386),
        "exact_target_met": not failed,
    }
    if failed:  # the rows and summary above are still printed
        raise RuntimeError(
            f"{len(failed)} of {len(rows)} runs failed: " + "; ".join(_failure(r) for r in failed)
        )


def _failure(row: Dict[str, Any]) -> str:
    where = f"{row['archive']} on {row['board']} with CMSIS-NN {row['cmsis_nn']}"
    if row["outcome"] == "REFUSED":
        return f"{where}: refused though covered ({row['why']})"
    return f"{where}: outputs differ from TVM's (max {row['max_diff']}) and the run ended well"


def _outcomes(c: Dict[str, Any]) -> str:
    """What failed (wrong, covered but refused) and which uncovered tags were refused."""
    refused = ", ".join(c["refused"]) or "none"
    return (
        f"wrong: {len(c['wrong'])}; covered but refused: {len(c['covered_refused'])}; "
        f"uncovered, refused: {refused}"
    )


def _fastest(c: Dict[str, Any], board: str) -> str:
    """The fastest exact CMSIS-NN release per KWS archive on ``board`` (part cmsis_nn)."""
    found = [
        f"{key.split(' ', 1)[1]}: {v['instructions']:,} with {v['cmsis_nn']}"
        for key, v in c["fastest_exact"].items()
        if key.startswith(board)
    ]
    return "; ".join(found) or "not measured"


PART = Part(
    "cmsis_nn",
    "20. KWS with CMSIS-NN per release and core: instructions, bit-exact (covered) or refused, RAM",
    run,
    columns=[
        "archive",
        "board",
        "cmsis_nn",
        "outcome",
        "instructions",
        "ram_bytes",
        "arena_bytes",
        "adapter_ram_bytes",
        "scratch_bytes",
        "window_scratch_bytes",
        "kernel_sum_bytes",
    ],  # fmt: skip
    targets=[
        Target(
            "KWS CMSIS-NN on qemu-mps3-an547 <= 1.90 M instructions, bit-exact (graph and AOT)",
            lambda c: _fastest(c, "qemu-mps3-an547"),
            "an547_target_met",
        ),
        Target(
            "KWS CMSIS-NN on qemu-mps2-an386 <= 7.75 M instructions, bit-exact (graph and AOT)",
            lambda c: _fastest(c, "qemu-mps2-an386"),
            "an386_target_met",
        ),
        Target(
            "every covered CMSIS-NN release runs bit-exact: none refused, none ends well wrong",
            _outcomes,
            "exact_target_met",
        ),
    ],
)
