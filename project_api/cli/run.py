"""``mlf-project run ARCHIVE_OR_PROJECT``: generate (for an archive), build, run, report.

Inputs come from ``--input`` (an .npz keyed by input name, or an .npy for a model with one
input), else deterministic random inputs (said on stderr). Outputs go to ``--output`` (an
.npz keyed ``output0..N-1``) and are summarised on stdout, or printed as one JSON object
with ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..errors import GenerateError, InputError
from .command import EXIT_FAILURE, EXIT_OK, Command
from .generate import add_generate_arguments, dependency_options
from .inputs import describe_specs, holds_inputs_of, load_inputs
from .lab import add_labgrid_arguments, apply_labgrid, check_labgrid

DEFAULT_TIMEOUTS = {"host": 10.0, "qemu": 60.0, "real": 30.0}
# Without --timeout, a run (one inference, or a whole standalone firmware) gets at least this.
MIN_RUN_TIMEOUT = 30.0
# Options that change how a project runs, not what is generated.
RUNTIME_OPTIONS = frozenset(
    {"qemu_icount", "timeout_sec", "serial_port", "serial_number", "verbose"}
)


class RunCommand(Command):
    name = "run"
    runs_model_code = True
    # The project types this command drives (the others are refused, naming their command).
    project_types: Tuple[str, ...] = ("host_driven", "standalone")
    help = "run a model on a board: generate and build when given an archive, then infer"
    description = (
        "Run one inference of a model on a board and report its outputs and timing. Given an "
        "MLF archive, a project is generated and built first (in a temporary directory, or "
        "--project-dir); given a generated project, it is built (incrementally) and run."
    )

    target_help = (
        "an MLF archive or a .tflite (compiled on the fly, cached), or a generated project "
        "directory"
    )
    icount_help = (
        "QEMU boards: -icount shift=0, so 'instructions' counts the guest's instructions, "
        "to within one tick of the board's timer (instructions_per_tick: 1 is exact)"
    )
    timeout_help = (
        "seconds to wait for each answer, the run's included (default by board: host 10, "
        "QEMU 60, real 30; a run then gets at least 30)"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help=self.target_help)
        add_generate_arguments(parser, board_default="")
        self.add_own_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--project-dir",
            help="where to generate and build for an archive (kept; reused when it still "
            "matches); default: a temporary directory",
        )
        parser.add_argument("--icount", action="store_true", help=self.icount_help)
        parser.add_argument("--timeout", type=positive_seconds, help=self.timeout_help)
        add_labgrid_arguments(parser)

    def add_own_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The arguments of this command alone (run: inputs, outputs, project type)."""
        add_input_argument(parser)
        parser.add_argument("--output", help="write the outputs to this .npz (output0..N-1)")
        parser.add_argument(
            "--project-type",
            choices=self.project_types,
            help="host_driven (default) or standalone (the inputs are embedded, run once)",
        )

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project
        from ..generate import is_generated_project, parse_option_assignments
        from .build import ProgressPrinter

        target = Path(args.target)
        options: Dict[str, Any] = dependency_options(args, parse_option_assignments(args.option))
        if args.icount:
            options["qemu_icount"] = "true"
        options.update(self.forced_options(args))
        _check_output_path(getattr(args, "output", None))
        check_labgrid(args)
        progress = ProgressPrinter(prefix="")
        with contextlib.ExitStack() as stack:
            generated = target.is_dir() and is_generated_project(target)
            if generated:
                project = Project.open(target)
                _check_same(project, args, options)
            else:
                _check_board_first(args)
                project = _project_for_archive(target, args, options, progress, stack)
            if project.project_type not in self.project_types:
                from ..generate.project_types import project_type_for

                raise InputError(
                    f"{project.dir} is a {project.project_type} project: `mlf-project "
                    f"{self.name}` does not drive it",
                    hint=f"use {project_type_for(project.project_type).cli_command}",
                )
            if args.icount and not project.board.is_qemu:
                raise GenerateError(
                    f"--icount only applies to QEMU boards, not {project.board.name}"
                )
            planned = None
            if project.project_type == "host_driven":
                planned = _plan_inputs(project, args)  # before building: fail fast
            elif args.input and generated:  # not an archive given as a directory
                raise InputError(
                    f"{project.dir} is a standalone project: its inputs were embedded when it "
                    "was generated",
                    hint="pass the archive with --input, or regenerate with -o sample_inputs=FILE",
                )
            try:
                project.build(progress=progress)
            finally:
                progress.done()
            apply_labgrid(project, args)
            kind = "real" if getattr(args, "labgrid", None) else _kind(project.board)
            timeout = args.timeout or DEFAULT_TIMEOUTS[kind]
            # An explicit --timeout bounds the run too: a firmware that hangs inside an
            # operator must be reported within the time the user asked for.
            run_timeout = args.timeout or max(timeout, MIN_RUN_TIMEOUT)
            status = self.execute(project, planned, timeout, run_timeout, args)
        return int(status)

    def forced_options(self, args: argparse.Namespace) -> Dict[str, str]:
        """Project options this command needs whatever the user passed."""
        return {}

    def execute(
        self,
        project: Any,
        planned: Optional[List[Tuple[str, Dict[str, Any]]]],
        timeout: float,
        run_timeout: float,
        args: argparse.Namespace,
    ) -> int:
        """Runs the built project and reports; the exit status."""
        if planned is None:
            result = _run_standalone(project, run_timeout)
        else:
            result = _run_host_driven(project, planned, timeout, run_timeout)
        _report(project, result, args)
        return int(result.get("status", EXIT_OK))


def add_input_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        help="inputs: .npz keyed by input name, or .npy for a model with one input "
        "(default: deterministic random inputs)",
    )


def positive_seconds(text: str) -> float:
    """argparse type of --timeout: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0 seconds and finite, not {text}")
    return value


def _check_output_path(path: Optional[str]) -> None:
    """--output's directory must exist before anything is built: the run's outputs would be
    lost at the end otherwise."""
    if not path:
        return
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise InputError(f"--output {path}: no such directory {parent}")
    if Path(path).is_dir():
        raise InputError(f"--output {path} is a directory; name an .npz file")


def _check_board_first(args: argparse.Namespace) -> None:
    """The board an archive would be generated for exists, and suits --icount: said before any
    generating is announced."""
    from ..board import load_board

    if not args.board:
        return
    board = load_board(args.board)
    if args.icount and not board.is_qemu:
        raise GenerateError(f"--icount only applies to QEMU boards, not {board.name}")


# --- project ---------------------------------------------------------------------------------


def _kind(board: Any) -> str:
    return "host" if board.is_host else "qemu" if board.is_qemu else "real"


def _check_same(project: Any, args: argparse.Namespace, options: Mapping[str, str]) -> None:
    if args.project_type and args.project_type != project.project_type:
        raise GenerateError(
            f"{project.dir} is a {project.project_type} project, not {args.project_type}",
            hint="pass the archive to generate the other kind",
        )
    if args.board and args.board != project.board.name:
        raise GenerateError(
            f"{project.dir} was generated for board {project.board.name}, not {args.board}",
            hint="generate another project for that board, or pass the archive",
        )
    if (
        args.model
        and args.model != project.info.get("model")
        and not any(m["name"] == args.model for m in project.models)
    ):
        names = ", ".join(m["name"] for m in project.models)
        raise GenerateError(f"{project.dir} holds model(s) {names}, not {args.model!r}")
    other = sorted(set(options) - RUNTIME_OPTIONS)
    if other:
        raise GenerateError(
            f"option {other[0]} changes generation; {project.dir} is already generated",
            hint="pass the archive instead, or regenerate the project",
        )
    _apply_runtime_options(project, options)


def _apply_runtime_options(project: Any, options: Mapping[str, Any]) -> None:
    from ..options import OPTIONS, coerce

    for key in set(options) & RUNTIME_OPTIONS:
        option = OPTIONS[key]
        value = coerce(key, option.type, options[key])
        project.options[key] = option.default if value is None else value


def _sha256(path: Path) -> Optional[str]:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _project_for_archive(
    archive: Path,
    args: argparse.Namespace,
    options: Dict[str, str],
    progress: Any,
    stack: contextlib.ExitStack,
) -> Any:
    from ..driver import Project
    from ..generate import is_generated_project

    board = args.board or "host"
    args.project_type = args.project_type or "host_driven"
    if args.input and args.project_type == "standalone":
        options = dict(options, sample_inputs=str(Path(args.input).resolve()))
    if args.project_dir:
        project_dir = Path(args.project_dir)
        if is_generated_project(project_dir):
            existing = Project.open(project_dir)
            wanted = {
                "board": board,
                "project_type": args.project_type,
                "model": args.model,
                "archive_sha256": _sha256(archive),
                "requested_options": _generation_options(options),
            }
            have = dict(
                existing.info,
                requested_options=_generation_options(existing.info.get("requested_options") or {}),
            )
            if all(have.get(k) == v for k, v in wanted.items()) and wanted["archive_sha256"]:
                # Runtime options (e.g. --icount) need no new project: the build is reused.
                _apply_runtime_options(existing, options)
                return existing
    else:
        scratch = Path(tempfile.mkdtemp(prefix="mlf-run-"))
        stack.callback(shutil.rmtree, scratch, True)
        project_dir = scratch / "project"
    if not archive.exists():
        raise GenerateError(f"{archive}: no such archive or project directory")
    progress(f"generating a project for {archive.name} on {board}")
    project = Project.generate(
        archive,
        project_dir,
        board=board,
        project_type=args.project_type,
        model=args.model,
        options=options,
        progress=None,
        force=True,
    )
    project.temporary = not args.project_dir
    for dependency in project.info.get("dependencies") or []:
        # e.g. CMSIS-NN built without its DSP code, TVM's CRT not compiled: said once
        for key in ("note", "cpu_features_note", "adapter_note"):
            if dependency.get(key):
                print(f"mlf-project run: {dependency[key]}", file=sys.stderr)
    return project


def _generation_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The options that shape the generated project (what a reused project must match)."""
    return {k: v for k, v in sorted(options.items()) if k not in RUNTIME_OPTIONS}


# --- inputs ------------------------------------------------------------------------------------


# --- running ------------------------------------------------------------------------------------


def _plan_inputs(project: Any, args: argparse.Namespace) -> List[Tuple[str, Dict[str, Any]]]:
    """(model name, inputs) of every model to run."""
    models = project.models
    chosen = [m for m in models if args.model in (None, "*", m["name"])] or models
    if len(chosen) > 1 and args.model != "*":
        names = ", ".join(m["name"] for m in models)
        raise InputError(f"the firmware holds models {names}: choose one with --model NAME")
    planned = []
    for model in chosen:
        path = args.input
        if path is not None and len(chosen) > 1 and not holds_inputs_of(path, model):
            path = None  # several models: the file feeds those whose inputs it names
        if path is None:
            source = "--input" if args.input is None else f"inputs in {args.input}"
            print(
                f"mlf-project run: no {source}: model {model['name']} runs on deterministic "
                f"random inputs ({describe_specs(model['inputs'])})",
                file=sys.stderr,
            )
        planned.append((model["name"], load_inputs(path, model, only_known=len(chosen) > 1)))
    return planned


def _run_host_driven(
    project: Any, planned: List[Tuple[str, Dict[str, Any]]], timeout: float, run_timeout: float
) -> Dict[str, Any]:
    per_model: List[Dict[str, Any]] = []
    with project.session(timeout=timeout, run_timeout=run_timeout) as session:
        for name, inputs in planned:
            outputs = session.run(inputs, model=name)
            per_model.append({"model": name, "outputs": outputs, "stats": session.last_stats})
    return {"runs": per_model}


def _run_standalone(project: Any, timeout: float) -> Dict[str, Any]:
    report = project.run_standalone(timeout=timeout)
    runs = []
    for index, name in sorted(report.models.items()):
        outputs = report.outputs_of(model=index, sample=0)
        stats = next((r for r in report.runs if r.model == index and r.sample == 0), None)
        runs.append({"model": name, "outputs": outputs, "stats": stats})
    status = EXIT_OK if report.status == "pass" else EXIT_FAILURE
    for error in report.errors:
        print(f"mlf-project run: device error: {error.message}", file=sys.stderr)
    return {"runs": runs, "status": status, "standalone": report.status}


def _report(project: Any, result: Dict[str, Any], args: argparse.Namespace) -> None:
    runs = result["runs"]
    many = len(runs) > 1
    if args.output:
        arrays: Dict[str, np.ndarray] = {}
        for run in runs:
            for key, value in run["outputs"].items():
                arrays[f"{run['model']}.{key}" if many else key] = value
        try:
            np.savez(args.output, **arrays)  # type: ignore[arg-type]
        except OSError as err:
            raise InputError(f"--output {args.output}: cannot write ({err.strerror})") from None
    documents = [_json_of(project, run) for run in runs]
    if args.json:
        document: Dict[str, Any] = documents[0] if not many else {"models": documents}
        if "standalone" in result:
            document["standalone"] = result["standalone"]
        print(json.dumps(document, indent=2))
        return
    for run, doc in zip(runs, documents):
        print(f"model {run['model']} on {doc['board']}:")
        for key, value in run["outputs"].items():
            print(f"  {key} {value.dtype}{list(value.shape)}: {_preview(value)}")
        line = f"  device time {doc['seconds'] * 1e3:.3f} ms ({doc['ticks']} ticks)"
        if doc["instructions"] is not None:
            line += f", {doc['instructions']} instructions"
            if doc["instructions_per_tick"] and doc["instructions_per_tick"] > 1:
                line += f" (±{doc['instructions_per_tick']:g}: one tick)"
        print(line)
    if "standalone" in result:
        print(f"standalone check: {result['standalone']}")
    if args.output:
        print(f"outputs written to {args.output}")


def _json_of(project: Any, run: Mapping[str, Any]) -> Dict[str, Any]:
    from ..report.profile import workspace_calls

    stats = run["stats"]
    described: Dict[str, Any] = next((m for m in project.models if m["name"] == run["model"]), {})
    ticks = getattr(stats, "ticks", None)
    tick_hz = getattr(stats, "tick_hz", None)
    seconds = ticks / tick_hz if ticks is not None and tick_hz else None
    instructions = getattr(stats, "instructions", None)
    if (
        instructions is None
        and ticks is not None
        and project.board.is_qemu
        and project.options.get("qemu_icount")
    ):
        instructions = int(round(ticks * project.board.instructions_per_tick()))
    per_tick = project.board.instructions_per_tick() if instructions is not None else None
    return {
        "board": project.board.name,
        "model": run["model"],
        "outputs": {
            key: {"shape": list(value.shape), "dtype": str(value.dtype)}
            for key, value in run["outputs"].items()
        },
        "seconds": seconds,
        "ticks": ticks,
        "tick_hz": tick_hz,
        "instructions": instructions,
        "instructions_per_tick": per_tick,
        "workspace_bytes": getattr(stats, "workspace_bytes", None),  # measured high-water
        "stack_bytes_used": getattr(stats, "stack_bytes_used", None),  # painted stack
        "workspace_reserved_bytes": (  # the largest operator window of the arena
            described["sizes"].get("workspace_window_bytes", described["sizes"]["workspace_bytes"])
            if described
            else None
        ),
        # Per operator call (host firmware): measured bytes beside the planned window.
        "workspace_calls": workspace_calls(described, getattr(stats, "workspace_marks", None)),
        "host_seconds": getattr(stats, "host_seconds", None),
        "project_dir": None if getattr(project, "temporary", False) else str(project.dir),
    }


def _preview(value: np.ndarray, limit: int = 12) -> str:
    flat = value.reshape(-1)
    text = np.array2string(flat[:limit], separator=" ", max_line_width=10**6)
    return text[:-1] + " ...]" if flat.size > limit else text
