"""Each operator call's measured workspace against the window the generator plans for it.

The runtime measures what every operator call holds of the workspace (``mlf_workspace_watch``:
bytes from where the call began, padding and links included, a refused request counted at
what it asked for), i.e. the least window the call runs in. The tests that run models on the
host (the C runtime's drivers, unbounded by windows, and the host firmware's RUN replies)
compare those figures with :func:`planned_windows`: a window smaller than its call's figure
fails them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from project_api.board import load_board
from project_api.generate.plan import plan_models
from project_api.generate.tables import MLF_FUNC_COPY
from project_api.read import open_archive


def planned_windows(
    archive: Path, model: Optional[str] = None, board: str = "host"
) -> Tuple[List[int], List[str], int]:
    """For ``model`` of ``archive`` as the generator plans it for ``board``: each operator
    call's window (bytes, in the tables' order), the function each call makes ("__copy" for a
    copy), and the model-wide workspace (a JSON graph's, or ``memory_plan=tvm``'s)."""
    with open_archive(archive) as opened:
        (plan,) = plan_models(opened, model, load_board(board))
        assert plan.memory is not None, f"{archive.name}: no liveness plan"
        tables = plan.tables
        funcs = [
            "__copy" if op.func == MLF_FUNC_COPY else tables.funcs[op.func] for op in tables.ops
        ]
        return [size for _, size in plan.memory.windows], funcs, plan.workspace.bytes


def over_window(marks: Sequence[int], windows: Sequence[int], funcs: Sequence[str]) -> List[str]:
    """The calls whose measured workspace exceeds their planned window, described."""
    assert len(marks) == len(windows) == len(funcs), (len(marks), len(windows), len(funcs))
    return [
        f"call {i} ({func}): {mark} B measured, window {window} B"
        for i, (mark, window, func) in enumerate(zip(marks, windows, funcs))
        if mark > window
    ]


def run_json_problems(document: Mapping[str, Any]) -> List[str]:
    """What is wrong with ``mlf-project run --json``'s per-call workspace (host firmware): it
    must be there, no call above its planned window, and its largest figure the RUN reply's
    high-water mark (two measures of one run)."""
    calls = document.get("workspace_calls")
    if calls is None:
        return ["the host's firmware reported no per-call workspace"]
    problems = [
        f"call {c['call']}: {c['bytes']} B measured, window {c['window']} B"
        for c in calls
        if c["window"] is not None and c["bytes"] > c["window"]
    ]
    most = max((c["bytes"] for c in calls), default=0)
    if most != document["workspace_bytes"]:
        problems.append(f"largest call {most} B, RUN's high-water {document['workspace_bytes']} B")
    return problems
