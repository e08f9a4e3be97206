"""Shared helpers of the benchmarks: where things are, which tools exist, one part's result."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent

BENCH_DIR = Path(__file__).resolve().parent
FIRMWARE_DIR = BENCH_DIR / "firmware"
QEMU_BOARD = "qemu-mps2-an385"
KWS = "kws_int8"

Log = Callable[[str], None]


class Skip(Exception):
    """A benchmark (or one row of it) that cannot run here; the message says why."""


@dataclass
class PartResult:
    """One benchmark's outcome: its rows (one per measurement), a summary of the figures the
    issue's targets name, and why anything was skipped."""

    name: str
    title: str
    status: str = "ok"  # ok | skipped | failed
    reason: str = ""
    rows: List[Dict[str, Any]] = field(default_factory=list)
    summary: Dict[str, Any] = field(default_factory=dict)
    skipped: List[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 2),
            "summary": self.summary,
            "rows": self.rows,
            "skipped": self.skipped,
        }


@dataclass
class Context:
    """What every benchmark gets: smoke or full, a scratch directory, a logger."""

    smoke: bool
    work: Path
    log: Log
    keep: bool = False
    probes: Dict[Any, Any] = field(default_factory=dict)  # built and run probes, shared

    def scratch(self, name: str) -> Path:
        path = self.work / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path


@dataclass(frozen=True)
class Target:
    """A target an issue set, read off a part's summary: ``figure`` words the summary,
    ``met`` names the summary key that says whether the target is met."""

    text: str
    figure: Callable[[Dict[str, Any]], str]
    met: str


@dataclass(frozen=True)
class Part:
    """One benchmark, as its module registers it (``PART``): the name ``--only`` takes, the
    title its table gets, the function that measures, its table's columns and its targets."""

    name: str
    title: str
    run: Callable[[Context, PartResult], None]
    columns: Sequence[str]
    targets: Sequence[Target] = ()
    # Its figures read the whole process (its children's CPU time, its descriptors and
    # children): with --jobs it runs in a process of its own (with the other such parts).
    alone: bool = False

    def run_alone(self, work: Path) -> None:
        """The part without bench/run.py (``python -m bench.<module> [--smoke]``): its
        summary and rows printed as they are."""
        context = Context(smoke="--smoke" in sys.argv, work=work, log=print)
        outcome = PartResult(self.name, self.title)
        self.run(context, outcome)
        print(outcome.summary)
        for row in outcome.rows:
            print(row)


# --- tools ------------------------------------------------------------------------------------


def have(*tools: str) -> bool:
    return all(shutil.which(tool) is not None for tool in tools)


def require_arm() -> None:
    if not have("arm-none-eabi-gcc", "arm-none-eabi-size"):
        raise Skip(
            "needs arm-none-eabi-gcc and arm-none-eabi-size (apt-get install gcc-arm-none-eabi "
            "libnewlib-arm-none-eabi)"
        )


def require_qemu() -> None:
    require_arm()
    if not have("qemu-system-arm"):
        raise Skip("needs qemu-system-arm (apt-get install qemu-system-arm)")


def device_board() -> str:
    """Where on-device figures are measured: the Cortex-M3 QEMU board when the Arm toolchain
    and QEMU are installed, else the host (64-bit pointers: larger structs)."""
    if have("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm"):
        return QEMU_BOARD
    return "host"


def host_compiler_available() -> bool:
    return any(have(name) for name in (os.environ.get("CC", "") or "cc", "gcc", "clang"))


# --- models -----------------------------------------------------------------------------------


def corpus_dir() -> Path:
    """$MLF_PROJECT_CORPUS, else ../shared/mlf beside the repository."""
    from project_api.modelgen.corpus import corpus_dir as find_corpus

    return find_corpus(REPO_ROOT)


def corpus_archives() -> List[Path]:
    """The real TVM archives; CMSIS-NN ones only when a CMSIS-NN checkout is at hand."""
    from project_api.modelgen.corpus import corpus_archives as archives_in

    cmsis = cmsis_nn_path()
    return [
        path
        for path in archives_in(corpus_dir())
        if "_cmsisnn" not in path.stem or cmsis is not None
    ]


def cmsis_nn_path() -> Optional[Path]:
    """A CMSIS-NN checkout: the one $MLF_PROJECT_CMSIS_NN names, else the tag the corpus was
    built against, checked out from ../shared/deps/CMSIS-NN.git (where CI keeps it)."""
    from project_api.modelgen.corpus import CMSIS_NN_ENV, shared_cmsis_nn_checkout

    root = os.environ.get(CMSIS_NN_ENV)
    if root:
        return Path(root) if (Path(root) / "Include" / "arm_nnfunctions.h").is_file() else None
    return shared_cmsis_nn_checkout(REPO_ROOT)


def corpus_options(archive: Path) -> Dict[str, Any]:
    """Project options a corpus archive needs (CMSIS-NN code needs its sources)."""
    cmsis = cmsis_nn_path()
    if "_cmsisnn" in archive.stem and cmsis is not None:
        return {"cmsis_path": str(cmsis)}
    return {}


def factory_archive(name: str, directory: Path) -> Path:
    """Writes the catalog model ``name`` to ``directory/name.tar`` (deterministic bytes; under
    another name first, so that a part running beside another never reads half of it)."""
    from project_api.modelgen import catalog

    path = directory / f"{name}.tar"
    if not path.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        staged = directory / f".{name}.{os.getpid()}.{threading.get_ident()}.tar"
        catalog()[name]().write(staged)
        os.replace(staged, path)
    return path


def archive_model_names(archive: Path) -> List[str]:
    from project_api.read import open_archive

    with open_archive(archive) as opened:
        return [model.name for model in opened.models]


# --- projects ---------------------------------------------------------------------------------


def generate(
    archive: Path,
    project_dir: Path,
    *,
    board: str,
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    project_type: str = "host_driven",
) -> Any:
    from project_api.driver import Project

    return Project.generate(
        archive,
        project_dir.resolve(),
        board=board,
        model=model,
        options=dict(options or {}),
        project_type=project_type,
        force=True,
    )


def configure(project: Any, definitions: Mapping[str, str]) -> None:
    """Configures the project's CMake build with extra ``-D`` cache entries (e.g.
    MLF_OPT_FLAGS=-Os) the way :func:`project_api.build.build` would, so that its later
    build reuses this configuration."""
    from project_api.build import find_cmake, find_ninja

    tool = find_cmake(project.options.get("cmake"))
    ninja = find_ninja()
    build_dir = Path(project.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    argv = [tool.path, "-S", str(Path(project.dir).resolve()), "-B", str(build_dir)]
    argv += ["-G", "Ninja" if ninja else "Unix Makefiles"]
    if ninja:
        argv.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
    argv += [f"-D{key}={value}" for key, value in definitions.items()]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"configuring {project.dir} failed:\n{done.stdout}\n{done.stderr}")


def c_bytes(data: bytes, per_line: int = 24) -> List[str]:
    """``data`` as lines of a C array initialiser (for the firmwares bench writes)."""
    return [
        ", ".join(f"0x{b:02x}" for b in data[at : at + per_line]) + ","
        for at in range(0, len(data), per_line)
    ]


def size_berkeley(elf: Path, tool: str = "arm-none-eabi-size") -> Dict[str, int]:
    """``size`` (Berkeley format): text (code + read-only data), data, bss."""
    out = subprocess.run([tool, str(elf)], capture_output=True, text=True, check=True).stdout
    fields = out.splitlines()[1].split()
    return {"text": int(fields[0]), "data": int(fields[1]), "bss": int(fields[2])}


def stopwatch() -> Callable[[], float]:
    began = time.perf_counter()
    return lambda: time.perf_counter() - began


def fit_line(xs: List[float], ys: List[float]) -> Dict[str, float]:
    """Least-squares y = slope * x + intercept, with r²."""
    n = len(xs)
    if n < 2:
        return {"slope": 0.0, "intercept": ys[0] if ys else 0.0, "r2": 1.0}
    mean_x = sum(xs) / n
    mean_y = sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    slope = sxy / sxx if sxx else 0.0
    intercept = mean_y - slope * mean_x
    ss_tot = sum((y - mean_y) ** 2 for y in ys)
    ss_res = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys))
    return {"slope": slope, "intercept": intercept, "r2": 1.0 - ss_res / ss_tot if ss_tot else 1.0}


def firmware_tables(project: Any) -> Tuple[Any, Dict[str, Any]]:
    """The graph tables a generated single-model project's firmware runs (the generator's
    own: a pool per tensor and the liveness plan with const tables, TVM's storage ids with
    graph_format=json) and the model's params."""
    from project_api.generate import MODEL_TAR
    from project_api.generate.plan import plan_models
    from project_api.read import open_archive

    (described,) = project.models
    with open_archive(Path(project.dir) / MODEL_TAR) as opened:
        (plan,) = plan_models(
            opened, str(described["name"]), project.board, project.project_type, project.options
        )
        return plan.tables, dict(plan.model.params or {})
