"""A model × target matrix: every archive on every board (local, QEMU, or a labgrid place),
run in parallel, checked against reference outputs, reported as a table, JSON and JUnit XML.

A cell generates and builds its own project, runs one inference on the archive's reference
inputs (``<stem>.inputs.npz`` beside it) or on deterministic random ones, and compares with
``<stem>.outputs.npz`` when present. A labgrid place runs one cell at a time; the rest run
``jobs`` at a time.
"""

from __future__ import annotations

import shutil
import threading
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..errors import MlfProjectError


@dataclass(frozen=True)
class Target:
    """Where a cell runs: a board, optionally reached through a labgrid place."""

    board: str
    place: Optional[str] = None

    @property
    def label(self) -> str:
        return f"{self.board}@{self.place}" if self.place else self.board


@dataclass
class Cell:
    archive: str
    target: str
    status: str = "not run"  # pass | fail | ran (no reference) | error
    message: str = ""
    instructions: Optional[int] = None
    microseconds: Optional[float] = None
    flash_bytes: Optional[int] = None
    ram_bytes: Optional[int] = None
    seconds: float = 0.0
    outputs: Dict[str, List[Any]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "ran")


@dataclass
class MatrixOptions:
    work: Path
    jobs: int = 1
    icount: bool = False
    coordinator: Optional[str] = None
    options: Mapping[str, Any] = field(default_factory=dict)


def references(archive: Path) -> tuple:
    """The archive's reference inputs and outputs (.npz beside it), each or both None."""
    from ..generate.samples import archive_stem

    found = []
    for suffix in (".inputs.npz", ".outputs.npz"):
        path = archive.parent / f"{archive_stem(archive)}{suffix}"
        found.append(dict(np.load(path)) if path.is_file() else None)
    return tuple(found)


def run_cell(archive: Path, target: Target, settings: MatrixOptions) -> Cell:
    from ..board import load_board
    from ..driver import Project
    from ..footprint import linked_sizes
    from ..generate.samples import random_inputs
    from ..modelgen import compare_outputs

    cell = Cell(str(archive), target.label)
    started = time.monotonic()
    try:
        inputs, expected = references(archive)
        options = dict(settings.options)
        if settings.icount and not target.place and load_board(target.board).is_qemu:
            options["qemu_icount"] = True  # the other boards of the matrix count no instructions
        directory = settings.work / f"{archive.stem}--{target.label.replace('@', '--')}"
        shutil.rmtree(directory, ignore_errors=True)
        # Several models: all of them in one firmware; the references pick the one to run.
        project = Project.generate(
            archive, directory, board=target.board, model="*", options=options
        )
        project.build()
        if target.place:
            project.run_overrides.update(
                labgrid_place=target.place, labgrid_coordinator=settings.coordinator
            )
        with project.session(timeout=60.0) as session:
            model = _model_for(session.models, inputs)
            feed = inputs if inputs is not None else random_inputs(model.inputs, seed=0)
            outputs = session.run(feed, model=model.name)
            stats = session.last_stats
        cell.instructions = None if stats.instructions is None else int(stats.instructions)
        cell.microseconds = round(stats.device_seconds * 1e6, 1)
        # The same accounting as `mlf-project footprint`: the linker map, else the objects.
        linked = linked_sizes(Path(project.build_dir), Path(project.firmware))
        cell.flash_bytes, cell.ram_bytes = linked.flash_bytes, linked.ram_bytes
        if expected is None:
            cell.status, cell.message = "ran", "no reference outputs"
        else:
            problems = compare_outputs(outputs, expected)
            cell.status = "fail" if problems else "pass"
            cell.message = "; ".join(problems)[:500]
    except MlfProjectError as err:
        cell.status, cell.message = "error", " ".join(str(err).split())[:500]
    cell.seconds = round(time.monotonic() - started, 2)
    return cell


def _model_for(models: Sequence[Any], inputs: Optional[Mapping[str, Any]]) -> Any:
    """The model the reference inputs are for (by input names), else the first."""
    if inputs is not None:
        for model in models:
            if {spec.name for spec in model.inputs} == set(inputs):
                return model
    return models[0]


def run_matrix(
    archives: Sequence[Path],
    targets: Sequence[Target],
    settings: MatrixOptions,
    progress: Callable[[Cell], None] = lambda _: None,
) -> List[Cell]:
    """Every archive on every target; cells in archive-major order whatever ran first."""
    place_locks: Dict[str, threading.Lock] = {t.place: threading.Lock() for t in targets if t.place}
    settings.work.mkdir(parents=True, exist_ok=True)

    def one(job: tuple) -> Cell:
        archive, target = job
        lock = place_locks.get(target.place or "")
        if lock is None:
            cell = run_cell(archive, target, settings)
        else:
            with lock:
                cell = run_cell(archive, target, settings)
        progress(cell)
        return cell

    jobs = [(a, t) for a in archives for t in targets]
    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        return list(pool.map(one, jobs))


COLUMNS = ("archive", "target", "status", "instructions", "microseconds", "flash_bytes",
           "ram_bytes", "seconds")  # fmt: skip


def table(cells: Sequence[Cell]) -> str:
    rows = [[_cell_text(c, column) for column in COLUMNS] for c in cells]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(COLUMNS)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(COLUMNS, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    failed = [c for c in cells if not c.ok]
    lines += [f"{c.archive} on {c.target}: {c.status}: {c.message}" for c in failed]
    return "\n".join(lines)


def _cell_text(cell: Cell, column: str) -> str:
    value = getattr(cell, column)
    if column == "archive":
        return Path(value).name
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else str(value)


def to_json(cells: Sequence[Cell]) -> List[Dict[str, Any]]:
    return [{k: v for k, v in asdict(c).items() if k != "outputs"} for c in cells]


def junit_xml(cells: Sequence[Cell], name: str = "mlf-project matrix") -> bytes:
    """One testsuite per target, one testcase per archive; fail and error as JUnit has them."""
    root = ElementTree.Element("testsuites", name=name)
    for target in dict.fromkeys(c.target for c in cells):
        mine = [c for c in cells if c.target == target]
        suite = ElementTree.SubElement(
            root,
            "testsuite",
            name=target,
            tests=str(len(mine)),
            failures=str(sum(c.status == "fail" for c in mine)),
            errors=str(sum(c.status == "error" for c in mine)),
            time=f"{sum(c.seconds for c in mine):.2f}",
        )
        for cell in mine:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=target,
                name=Path(cell.archive).stem,
                time=f"{cell.seconds:.2f}",
            )
            if cell.status == "fail":
                ElementTree.SubElement(case, "failure", message=cell.message or "outputs differ")
            elif cell.status == "error":
                ElementTree.SubElement(case, "error", message=cell.message)
            figures = {k: getattr(cell, k) for k in COLUMNS[3:7] if getattr(cell, k) is not None}
            if figures:
                props = ElementTree.SubElement(case, "properties")
                for key, value in figures.items():
                    ElementTree.SubElement(props, "property", name=key, value=str(value))
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
