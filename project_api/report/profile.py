"""Per-operator profile of one model: the device's call records made into a table.

A firmware generated with the ``profile`` option records every call of the model's own
functions during a RUN (template_project/firmware/mlf_profile.h); the session fetches the
records (:meth:`Session.profile`). Here they become operator calls:

- names come from the firmware's symbol table (addresses relocated by the anchor the device
  sends, for position-independent host builds);
- the operator level is the calls ``__tvm_main__`` makes (AOT models) or the calls made from
  outside the model's code (graph models: the executor's);
- ticks become instructions (QEMU ``-icount``), cycles (a Cortex-M board: SysTick counts CPU
  cycles) or microseconds (host);
- the sum over operator calls is set against the whole inference the RUN reply timed: the
  difference is the executor's dispatch plus the profiling hooks, measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..read.elf import ElfFile

MAIN_SUFFIX = "___tvm_main__"
ANCHOR_SYMBOL = "mlf_profile_start"


@dataclass
class OperatorCall:
    """One call of an operator function, in execution order."""

    index: int
    function: str
    ticks: int
    value: float  # in the profile's unit
    share: float  # of the whole inference
    workspace_bytes: int
    input_bytes: Optional[int] = None
    output_bytes: Optional[int] = None
    window_bytes: Optional[int] = None  # its workspace window in the arena (liveness plan)

    def to_json(self) -> Dict[str, Any]:
        return {
            "index": self.index,
            "function": self.function,
            "ticks": self.ticks,
            "value": self.value,
            "share": self.share,
            "workspace_bytes": self.workspace_bytes,
            "window_bytes": self.window_bytes,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
        }


@dataclass
class Profile:
    """Where one inference of ``model`` spends its time, per operator call."""

    model: str
    board: str
    executor: str
    unit: str  # "instructions" | "cycles" | "us"
    calls: List[OperatorCall]
    whole_ticks: int
    tick_hz: int
    ticks_per_unit: float
    runs: int = 1
    dropped: int = 0
    notes: List[str] = field(default_factory=list)

    def convert(self, ticks: float) -> float:
        return ticks / self.ticks_per_unit

    @property
    def whole(self) -> float:
        return self.convert(self.whole_ticks)

    @property
    def calls_total(self) -> float:
        return sum(call.value for call in self.calls)

    @property
    def overhead(self) -> float:
        """The whole inference minus its operator calls: dispatch and profiling hooks."""
        return self.whole - self.calls_total

    def to_json(self) -> Dict[str, Any]:
        return {
            "model": self.model,
            "board": self.board,
            "executor": self.executor,
            "unit": self.unit,
            "runs": self.runs,
            "whole": self.whole,
            "calls_total": self.calls_total,
            "overhead": self.overhead,
            "overhead_share": self.overhead / self.whole if self.whole else None,
            "dropped_calls": self.dropped,
            "calls": [call.to_json() for call in self.calls],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        unit = self.unit
        width = max([len("function")] + [len(c.function) for c in self.calls])
        lines = [
            f"model {self.model} on {self.board} ({self.executor} executor): "
            f"{len(self.calls)} operator calls, {unit}"
            + (f", median of {self.runs} runs" if self.runs > 1 else ""),
            f"{'#':>3}  {'function':<{width}}  {unit:>14}  {'share':>7}  {'workspace':>10}  "
            f"{'window':>10}  {'in bytes':>9}  {'out bytes':>9}",
        ]
        for call in self.calls:
            lines.append(
                f"{call.index:>3}  {call.function:<{width}}  {_figure(call.value):>14}  "
                f"{100 * call.share:>6.2f}%  {call.workspace_bytes:>10,}  "
                f"{_bytes(call.window_bytes):>10}  "
                f"{_bytes(call.input_bytes):>9}  {_bytes(call.output_bytes):>9}"
            )
        whole = self.whole
        lines.append(
            f"sum of operator calls {_figure(self.calls_total)} of the whole inference "
            f"{_figure(whole)} {unit}: dispatch + profiling {_figure(self.overhead)} "
            f"({100 * self.overhead / whole if whole else 0:.3f} %)"
        )
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _bytes(value: Optional[int]) -> str:
    return "-" if value is None else f"{value:,}"


# --- building a profile ----------------------------------------------------------------------


def symbol_table(firmware: Path) -> Tuple[Dict[int, str], Optional[int]]:
    """Function addresses (Thumb bit cleared) to names, and the anchor's address."""
    names: Dict[int, str] = {}
    anchor = None
    for symbol in ElfFile(Path(firmware).read_bytes()).symbols():
        if not symbol.name or not symbol.section or symbol.name.startswith("$"):
            continue
        address = symbol.value & ~1
        if symbol.size and address not in names:
            names[address] = symbol.name
        if symbol.name == ANCHOR_SYMBOL:
            anchor = address
    return names, anchor


def name_calls(records: Sequence[Any], anchor: int, firmware: Path) -> List[Tuple[str, Any]]:
    """(function name, record) of every record, addresses relocated by the anchor."""
    names, linked_anchor = symbol_table(firmware)
    bias = (anchor & ~1) - linked_anchor if linked_anchor is not None else 0
    named = []
    for record in records:
        address = (record.function & ~1) - bias
        named.append((names.get(address, f"0x{address:x}"), record))
    return named


def operator_level(named: Sequence[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """The operator calls: those ``__tvm_main__`` makes (AOT), else the outermost calls."""
    for position, (name, record) in enumerate(named):
        if name.endswith(MAIN_SUFFIX):
            inside = []
            for other_name, other in named[position + 1 :]:
                if other.enter_ticks > record.exit_ticks:
                    break
                if other.depth == record.depth + 1:
                    inside.append((other_name, other))
            return inside
    if not named:
        return []
    top = min(record.depth for _, record in named)
    return [(name, record) for name, record in named if record.depth == top]


def graph_call_sizes(
    tables: Any, windows: Optional[Sequence[Sequence[int]]] = None
) -> List[Tuple[str, int, int, Optional[int]]]:
    """(function, input bytes, output bytes, window bytes) of every function call of a
    graph, in order (copies are not calls); ``windows``: each operator's (offset, bytes)
    workspace window, from the liveness plan (None: no windows)."""
    from ..generate.tables import MLF_FUNC_COPY

    sizes = []
    for index, op in enumerate(tables.ops):
        if op.func == MLF_FUNC_COPY:
            continue
        views = [tables.views[a] for a in op.args]
        outputs = op.num_outputs
        inputs = views[: len(views) - outputs]
        sizes.append(
            (
                tables.funcs[op.func],
                sum(v.nbytes for v in inputs),
                sum(v.nbytes for v in views[len(views) - outputs :]),
                None if windows is None else int(windows[index][1]),
            )
        )
    return sizes


def workspace_calls(
    described: Mapping[str, Any], marks: Optional[Sequence[int]]
) -> Optional[List[Dict[str, Any]]]:
    """Each operator call's workspace as the device measured it (``marks``: the RUN reply's
    figures, the least window each call runs in) beside the window the liveness plan gave it
    (``described``: the model's entry in project.json; ``window`` None without windows: a
    workspace of its own, ``sizes.workspace_bytes``); None when the firmware measures none."""
    if marks is None:
        return None
    plan = described.get("memory_plan") or {}
    windows = [int(w[1]) for w in plan.get("windows", [])]
    return [
        {"call": i, "bytes": int(b), "window": windows[i] if i < len(windows) else None}
        for i, b in enumerate(marks)
    ]


@dataclass(frozen=True)
class ProfileTarget:
    """What is known about the model and the board the records came from."""

    model: str
    board: Any
    executor: str
    firmware: Path
    call_sizes: Optional[List[Tuple[str, int, int, Optional[int]]]] = None  # graph models
    window_bytes: Optional[int] = None  # AOT: the one window every call draws from


def unit_of(board: Any, tick_hz: int, ticks_to_instructions: Optional[float]) -> Tuple[str, float]:
    """The unit figures are given in, and ticks per unit."""
    if ticks_to_instructions:
        return "instructions", 1.0 / ticks_to_instructions
    if not board.is_host and not board.is_qemu:
        return "cycles", tick_hz / float(board.timer.clock_hz)
    return "us", tick_hz / 1e6


def build_profile(
    target: ProfileTarget,
    runs: Sequence[Tuple[Sequence[Any], int, int, int]],
    tick_hz: int,
    ticks_to_instructions: Optional[float],
) -> Profile:
    """``runs``: (records, dropped, anchor, whole-inference ticks) of each run. Per-call
    figures are the median over runs; the whole is their sum plus the median over runs of
    the time spent outside the calls (a median of wholes could be less than a sum of
    medians, and dispatch would come out negative)."""
    unit, ticks_per_unit = unit_of(target.board, tick_hz, ticks_to_instructions)
    per_run = [
        operator_level(name_calls(records, anchor, target.firmware))
        for records, _, anchor, _ in runs
    ]
    notes: List[str] = []
    shape = [name for name, _ in per_run[-1]]
    kept = [i for i, calls in enumerate(per_run) if [name for name, _ in calls] == shape]
    usable = [per_run[i] for i in kept]
    if len(usable) < len(per_run):
        notes.append(f"{len(per_run) - len(usable)} run(s) called other functions; left out")
    outside = statistics.median(
        runs[i][3] - sum(call.ticks for _, call in per_run[i]) for i in kept
    )
    medians = [
        int(statistics.median(calls[index][1].ticks for calls in usable))
        for index in range(len(shape))
    ]
    whole_ticks = int(sum(medians) + max(outside, 0))
    sizes = target.call_sizes
    if sizes is not None and len(sizes) != len(shape):
        notes.append("operator calls do not match the graph's: tensor sizes left out")
        sizes = None
    calls = []
    for index, name in enumerate(shape):
        ticks = medians[index]
        workspace = max(calls[index][1].workspace_bytes for calls in usable)
        value = ticks / ticks_per_unit
        calls.append(
            OperatorCall(
                index=index,
                function=name,
                ticks=ticks,
                value=value,
                share=ticks / whole_ticks if whole_ticks else 0.0,
                workspace_bytes=workspace,
                input_bytes=None if sizes is None else sizes[index][1],
                output_bytes=None if sizes is None else sizes[index][2],
                window_bytes=target.window_bytes if sizes is None else sizes[index][3],
            )
        )
    dropped = max(dropped for _, dropped, _, _ in runs)
    if dropped:
        notes.append(f"{dropped} call(s) not recorded: the device's table was full")
    if unit == "instructions" and 0 < ticks_per_unit < 1:
        notes.append(
            f"one tick of the board's timer is {1 / ticks_per_unit:g} instructions: "
            "each count is to within that"
        )
    if target.executor == "aot":
        notes.append("AOT: tensor sizes per call are not known on the device")
    return Profile(
        model=target.model,
        board=target.board.name,
        executor=target.executor,
        unit=unit,
        calls=calls,
        whole_ticks=whole_ticks,
        tick_hz=tick_hz,
        ticks_per_unit=ticks_per_unit,
        runs=len(runs),
        dropped=dropped,
        notes=notes,
    )


def profile_target(project: Any, model_name: str) -> ProfileTarget:
    """The :class:`ProfileTarget` of ``model_name`` in a generated, built project."""
    from ..generate import MODEL_TAR
    from ..generate.executors import executor_for
    from ..generate.tables import compile_graph
    from ..read import open_archive

    described: Mapping[str, Any] = next(m for m in project.models if m["name"] == model_name)
    executor = str(described.get("executor", "graph"))
    windows = (described.get("memory_plan") or {}).get("windows")  # per operator of the graph
    sizes = None
    if executor == "graph":
        with open_archive(Path(project.dir) / MODEL_TAR) as archive:
            model = next(m for m in archive.models if m.name == model_name)
            sizes = graph_call_sizes(compile_graph(executor_for(model).graph(model)), windows)
    window = int(windows[0][1]) if executor != "graph" and windows else None
    return ProfileTarget(model_name, project.board, executor, Path(project.firmware), sizes, window)
