"""``mlf-project generate ARCHIVE PROJECT_DIR --board BOARD``: render a firmware project."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict

from ..errors import GenerateError
from ..options import PROJECT_TYPES
from .command import EXIT_OK, Command


def add_generate_arguments(parser: argparse.ArgumentParser, *, board_default: str) -> None:
    """The options generate and run share."""
    default_text = board_default or "host for an archive, the project's own board for a project"
    parser.add_argument(
        "--board", default=board_default, help=f"target board (default: {default_text})"
    )
    parser.add_argument(
        "--model",
        help="the model of a multi-model archive to build, or '*' for all of them in one firmware",
    )
    add_option_argument(
        parser,
        help="a project option (graph_format, workspace_size_bytes, compile_definitions, "
        "cmsis_path, sample_inputs, ...); repeatable",
    )
    add_tflite_flags(parser)
    deps = parser.add_argument_group(
        "external dependencies",
        "add or override the archive's external_dependencies without editing it. A project "
        "regenerated in place (--force) reuses the pins of its own dependencies.lock.json for "
        "every dependency declared as before and resolves changed ones afresh.",
    )
    deps.add_argument(
        "--dependency",
        action="append",
        default=[],
        metavar="SPEC",
        help="a dependency that replaces the archive's entry of the same short_name or adds "
        "one: 'short_name=NAME,url=URL,url_type=git|url|path|mlf_path,version_spec=REF' "
        "(also sha256=, recipe=, sources=a;b, include_dirs=, defines=), or a JSON object or "
        "list; repeatable",
    )
    deps.add_argument(
        "--cmsis-path",
        metavar="DIR",
        help="a CMSIS-NN (or CMSIS_5) checkout for models calling arm_* kernels "
        "(TVM's cmsis_path option)",
    )
    deps.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="dependency cache (default: $MLF_PROJECT_CACHE, else the user cache directory)",
    )
    deps.add_argument(
        "--offline",
        action="store_true",
        help="use only what the cache holds; fail listing every dependency missing from it",
    )
    deps.add_argument(
        "--lock",
        metavar="FILE",
        help="regenerate the dependencies exactly as this dependencies.lock.json pins them",
    )
    add_trust_arguments(deps)
    deps.add_argument(
        "--refresh-dependencies",
        action="store_true",
        help="fetch git/url dependencies again (e.g. a moved branch) instead of reusing the "
        "cache and the project's own lock file",
    )


def add_tflite_flags(parser: argparse.ArgumentParser) -> None:
    """How a .tflite given for an archive is compiled on the fly."""
    parser.add_argument(
        "--cmsis-nn",
        action="store_true",
        help="for a .tflite: compile its int8 operators to CMSIS-NN calls "
        "(as `compile --cmsis-nn`; option cmsis_nn)",
    )


def add_dependency_flags(parser: argparse.ArgumentParser, whom: str) -> None:
    """--dependency, --cmsis-path and the trust flags, for commands that generate a project
    of their own (``whom``: for what the dependency counts)."""
    parser.add_argument(
        "--dependency",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"a dependency {whom}, as `generate --dependency`; repeatable",
    )
    parser.add_argument(
        "--cmsis-path", metavar="DIR", help="a CMSIS-NN checkout, as `generate --cmsis-path`"
    )
    add_tflite_flags(parser)
    add_trust_arguments(parser)


def add_trust_arguments(group: Any) -> None:
    """What the user allows the archive's own external_dependencies (docs/security.md)."""
    group.add_argument(
        "--allow-archive-paths",
        action="store_true",
        help="let the archive's dependencies name local paths outside it (path entries, "
        "file:// or local git repositories); refused by default",
    )
    group.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[/PATH]",
        help="a host (or host/path prefix) the archive's git/url dependencies may come from, "
        "beside the homes of CMSIS-NN and CMSIS 5, $MLF_PROJECT_ALLOWED_HOSTS and "
        "~/.config/mlf-project-api/allowed_hosts; repeatable",
    )
    group.add_argument(
        "--allow-dependency-cmake",
        action="store_true",
        help="let a dependency the archive names run its own CMakeLists.txt; by default it "
        "is built from a recipe (C sources only)",
    )


def trust_options(args: argparse.Namespace, options: Dict[str, Any]) -> Dict[str, Any]:
    """``options`` with the flags of :func:`add_trust_arguments` added."""
    options = dict(options)
    flags = {
        "allow_archive_paths": getattr(args, "allow_archive_paths", False),
        "allow_dependency_cmake": getattr(args, "allow_dependency_cmake", False),
        "allowed_hosts": ",".join(getattr(args, "allow_host", None) or []),
    }
    for name, value in flags.items():
        if value:
            if name in options:
                raise GenerateError(f"option {name} given twice (a flag and -o)")
            options[name] = "true" if value is True else value
    return options


def add_option_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--option/-o KEY=VALUE``, repeatable: read with ``parse_option_assignments``."""
    parser.add_argument(
        "--option", "-o", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def dependency_options(args: argparse.Namespace, options: Dict[str, Any]) -> Dict[str, Any]:
    """``options`` with the dependency flags added (paths made absolute: they are relative to
    the current directory, not to the archive)."""
    options = dict(options)
    given = list(getattr(args, "dependency", None) or [])
    if given:
        if "dependencies" in options:
            raise GenerateError(
                "give dependencies either with --dependency or with -o dependencies=..., not both"
            )
        options["dependencies"] = given
    for flag, name in (
        ("cmsis_path", "cmsis_path"),
        ("cache_dir", "cache_dir"),
        ("lock", "lock_file"),
    ):
        value = getattr(args, flag, None)
        if value:
            if name in options:
                raise GenerateError(
                    f"option {name} given twice (--{flag.replace('_', '-')} and -o)"
                )
            options[name] = str(Path(value).expanduser().resolve())
    if getattr(args, "cmsis_nn", False):
        options["cmsis_nn"] = "true"
    if getattr(args, "offline", False):
        options["offline"] = "true"
    if getattr(args, "refresh_dependencies", False):
        options["refresh_dependencies"] = "true"
    return trust_options(args, options)


class GenerateCommand(Command):
    name = "generate"
    help = "generate a CMake firmware project for a model and a board"
    description = (
        "Render a self-contained firmware project (CMakeLists.txt, main.c, the model's code, "
        "the runtime, the params as an aligned read-only blob) for one model of an MLF "
        "archive on a board. Sizes are computed, and a model that does not fit the board is "
        "refused before anything is built."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "archive",
            help="MLF archive (.tar, .tar.gz) or extracted directory, or a .tflite "
            "(compiled on the fly)",
        )
        parser.add_argument("project_dir", help="directory to create (new or empty)")
        add_generate_arguments(parser, board_default="host")
        parser.add_argument(
            "--project-type",
            choices=PROJECT_TYPES,
            default="host_driven",
            help="host_driven (answers the device protocol; default), standalone (runs its "
            "embedded samples once and prints the results) or mlperftiny (speaks the MLPerf "
            "Tiny benchmark protocol: docs/mlperftiny.md)",
        )
        parser.add_argument(
            "--force", action="store_true", help="replace a project generated there before"
        )

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project
        from ..generate import parse_option_assignments
        from .build import ProgressPrinter

        options = dependency_options(args, parse_option_assignments(args.option))
        project = Project.generate(
            args.archive,
            args.project_dir,
            board=args.board,
            project_type=args.project_type,
            model=args.model,
            options=options,
            progress=ProgressPrinter(),
            force=args.force,
        )
        for model in project.models:
            sizes = model["sizes"]
            memory = (
                f"arena {sizes['arena_bytes']} B (tensors and every operator's workspace "
                f"window; TVM's plan {sizes['tvm_plan_bytes']} B)"
                if model.get("memory_plan")
                else f"arena {sizes['arena_bytes']} B, workspace {sizes['workspace_bytes']} B"
            )
            print(f"model {model['name']}: {memory}, params {sizes['params_blob_bytes']} B (flash)")
        print(f"next: mlf-project build {args.project_dir}")
        return EXIT_OK
