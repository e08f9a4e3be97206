"""Render a firmware project for one model (or every model) of an archive on a board.

The project is self-contained and uses relative paths only, so it can be moved::

    model.tar                  copy of the archive (its presence marks a generated project)
    microtvm_api_server.py     TVM's client talks to the project through it
    project.json               what was generated: board, type, options, models, sizes
    CMakeLists.txt
    model/<mod>/...            the model's generated C (and objects, include dirs)
    src/main.c                 set up every model, then serve the device protocol (host_driven),
                               run the embedded samples once (standalone) or answer the MLPerf
                               Tiny benchmark protocol (mlperftiny): project_types/
    src/mlf_models.h
    src/model_<mod>.c          const graph tables (or the JSON parse buffer), state, arena,
                               workspace, init function
    src/params_<mod>.S + .bin  the params blob, 64-byte aligned, read-only, via .incbin
    src/graph_<mod>.S + .json  graph_format=json only
    src/samples_<mod>.S + .bin standalone only
    runtime/                   copy of crt/include, crt/src, template_project/firmware
    board/                     the board's C seam, linker script, toolchain file
    deps/, deps.cmake, dependencies.lock.json   when the model has external dependencies

The archive's external dependencies are judged (:mod:`project_api.resolve.trust`) before any
directory is made. Generation happens in a staging directory beside the destination, which is
swapped in at the end: a failure leaves the destination as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ..board import load_board
from ..errors import GenerateError
from ..jsontext import parse_json
from ..options import normalize_options
from ..read import open_archive
from .dependencies import declare_dependencies
from .extra_files import check_extra_files, unpack_extra_files
from .model_source import archive_source
from .plan import MODEL_TAR, PROJECT_FILE, PathLike, Progress, plan_models_normalized
from .render import write_project
from .staging import Destination, check_destination, staged


def generate_firmware(
    archive: PathLike,
    project_dir: PathLike,
    *,
    board: str = "host",
    project_type: str = "host_driven",
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    progress: Optional[Progress] = None,
    force: bool = False,
) -> Dict[str, Any]:
    """Generates a firmware project (every project type but ``library``, whose "project" is
    an export: :func:`project_api.generate.generate_project` chooses); returns what it wrote
    to ``project.json``."""
    say = progress or (lambda _message: None)
    opts = normalize_options(options)
    the_board = load_board(board)
    destination = Path(project_dir)
    check_destination(destination, force, PROJECT_DESTINATION)
    extra = check_extra_files(opts["extra_files_tar"])
    archive_path = archive_source(archive, say, opts, the_board)
    say(f"reading {archive_path}")
    with open_archive(archive_path) as opened:
        plans = plan_models_normalized(opened, model, the_board, project_type, opts)
        # The archive's dependencies are judged before a directory is made or a byte fetched.
        declared = declare_dependencies(opened, archive_path, plans, opts, say)
        with staged(destination, PROJECT_DESTINATION) as staging:
            info = write_project(
                staging,
                opened,
                archive_path,
                plans,
                the_board,
                project_type,
                model,
                opts,
                say,
                declared=declared,
                previous=destination,
                requested=dict(options or {}),
            )
            if extra is not None:
                unpack_extra_files(extra, staging)
                say(f"unpacked {extra} into the project")
    say(f"generated {destination}")
    return info


# --- destination ---------------------------------------------------------------------------


def is_generated_project(path: Path) -> bool:
    return (path / MODEL_TAR).is_file() and (path / PROJECT_FILE).is_file()


PROJECT_DESTINATION = Destination(
    recognise=is_generated_project,
    kind="a generated project",
    not_ours="is not empty and is not a generated project",
    not_ours_hint="choose a new or empty directory",
    force_hint="pass --force (from Python: force=True) to replace it",
    verb="generating",
)


def read_project_info(project_dir: Path) -> Dict[str, Any]:
    path = Path(project_dir) / PROJECT_FILE
    try:
        info = parse_json(path.read_text())
    except FileNotFoundError:
        raise GenerateError(
            f"{project_dir} is not a generated project (no {PROJECT_FILE})",
            hint="generate one with `mlf-project generate ARCHIVE DIR --board BOARD`",
        ) from None
    except ValueError as err:
        raise GenerateError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(info, dict) or info.get("generator") != "mlf-project-api":
        raise GenerateError(f"{path} was not written by mlf-project-api")
    return info
