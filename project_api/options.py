"""Every option a project is generated, built and run with: one table, one coercion.

:data:`OPTIONS` serves every front end. Python callers and the CLI's ``-o KEY=VALUE`` go
through :func:`normalize_options` (every generator option typed, defaults filled in, unknown
names refused). TVM's Project API (:mod:`project_api.serve.options`) advertises the options
that name Project API methods and coerces each call's options with :func:`coerce`, typed as
the Project API declares them. Values may arrive as strings (the CLI, ``tvmc``); one that
cannot be understood raises :class:`~project_api.errors.GenerateError` naming the option.

Standard library only: the Project API server imports this when it starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .coercion import TYPES, coerce, json_type, parse_compile_definitions
from .errors import GenerateError

GRAPH_FORMATS = ("tables", "json")
MEMORY_PLANS = ("liveness", "tvm")
MAX_SIZE_BYTES = (1 << 32) - 1  # byte counts in the runtime and the generated C are 32-bit
MIN_STACK_BYTES = 1024  # KWS uses 600-816 B; a fault in the startup code reports nothing
PROJECT_TYPES = ("host_driven", "standalone", "mlperftiny", "library")
# What a host_driven firmware answers on its link: our framed protocol (docs/protocol.md) or
# TVM's microTVM RPC server (tvm.micro.Session).
DEVICE_PROTOCOLS = ("mlf", "microtvm")

_GENERATE = ("generate_project",)
_TRANSPORT = ("flash", "open_transport")
_SAME: Any = object()  # Option.api_default: the Project API uses the generator's default


@dataclass(frozen=True)
class Option:
    """One option.

    ``type`` is one of :data:`TYPES`; ``required``/``optional`` name the Project API methods
    it applies to (none: the Project API does not offer it). Where the Project API differs
    from the generator, ``api_type`` is how it types the value and ``api_default`` (a value,
    or a function called when the table is advertised) what it fills in. ``generator`` is
    False for what generate_project takes as arguments (board, project_type, ...): the
    generator accepts those names among its options and drops them.
    """

    name: str
    type: str
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]] = None
    required: Tuple[str, ...] = ()
    optional: Tuple[str, ...] = ()
    api_type: Optional[str] = None
    api_default: Any = _SAME
    generator: bool = True

    @property
    def offered(self) -> bool:
        """Whether the Project API offers the option."""
        return bool(self.required or self.optional)

    @property
    def project_api_type(self) -> str:
        return self.api_type or self.type

    def project_api_default(self) -> Any:
        if self.api_default is _SAME:
            return self.default
        return self.api_default() if callable(self.api_default) else self.api_default


def _environment(name: str) -> Callable[[], Optional[str]]:
    return lambda: os.environ.get(name) or None


def _table(*options: Option) -> Dict[str, Option]:
    return {option.name: option for option in options}


# In the order server_info_query advertises them: TVM's standard options, then ours; the
# options only the generator knows come last. The board option's choices are the installed
# boards, filled in when the table is advertised.
OPTIONS: Dict[str, Option] = _table(
    Option(
        "verbose",
        "bool",
        False,
        "Show the full output of CMake and the compiler while generating and building.",
        optional=("generate_project", "build"),
    ),
    Option(
        "project_type",
        "str",
        None,
        "Type of project: host_driven (the firmware waits for commands over the link: set "
        "input, run, get output), standalone (it runs the archive's sample inputs once, "
        "prints the results and exits) or mlperftiny (it speaks the MLPerf Tiny / EEMBC "
        "benchmark protocol).",
        choices=PROJECT_TYPES,
        required=_GENERATE,
        generator=False,
    ),
    Option(
        "board",
        "str",
        None,
        "Board to generate for (see `mlf-project boards`): host runs natively, qemu-* "
        "under QEMU (qemu-system-arm, qemu-system-riscv32), others on real hardware.",
        required=_GENERATE,
        generator=False,
    ),
    Option(
        "cmsis_path",
        "str",
        None,
        "CMSIS directory (with CMSIS-NN) for models that call arm_nn* kernels; default "
        "$CMSIS_PATH.",
        optional=_GENERATE,
        # The generator reads $CMSIS_PATH itself, and only when the model calls CMSIS-NN.
        api_default=_environment("CMSIS_PATH"),
    ),
    Option(
        "compile_definitions",
        "definitions",
        None,
        "Extra preprocessor definitions for the project: a list, or one string of several "
        "such as '-DX=1 Y \"Z=a b\"' (NAME or NAME=VALUE, -D optional).",
        optional=_GENERATE,
    ),
    Option(
        "extra_files_tar",
        "str",
        None,
        "A tar archive unpacked into the generated project directory.",
        optional=_GENERATE,
    ),
    Option(
        "warning_as_error",
        "bool",
        True,
        "Compile the project's own sources with -Werror.",
        optional=_GENERATE,
        api_default=False,  # TVM's default for its standard option
    ),
    Option(
        "serial_port",
        "str",
        None,
        "Serial port of a real board (e.g. /dev/serial/by-id/...); default: found by the "
        "board's USB IDs or serial_number.",
        optional=_TRANSPORT,
    ),
    Option(
        "serial_number",
        "str",
        None,
        "USB serial number of the board to use when several are connected.",
        optional=_TRANSPORT,
    ),
    Option(
        "workspace_size_bytes",
        "int",
        None,
        "Workspace pool size in bytes; default: computed from the archive's metadata.",
        optional=_GENERATE,
    ),
    Option(
        "qemu_icount",
        "bool",
        False,
        "Run QEMU with -icount shift=0,align=off,sleep=on so instruction counts are "
        "deterministic (QEMU boards only).",
        optional=("generate_project", "flash", "open_transport"),
    ),
    Option(
        "model",
        "str",
        None,
        "Which model of a multi-model archive to build; '*' links all of them into one "
        "firmware. Default: the archive's only model.",
        optional=_GENERATE,
        generator=False,
    ),
    Option(
        "graph_format",
        "str",
        "tables",
        "How the graph is embedded in the firmware: tables (pre-compiled C tables) or json "
        "(the graph.json text, parsed on the device).",
        choices=GRAPH_FORMATS,
        optional=_GENERATE,
    ),
    Option(
        "memory_plan",
        "str",
        "liveness",
        "Where const graph tables put tensors and workspace: liveness (one arena, tensors and "
        "each operator's workspace window placed by when they live) or tvm (TVM's storage "
        "plan side by side and one workspace as large as the largest operator's, the layout "
        "graph_format=json keeps).",
        choices=MEMORY_PLANS,
        optional=_GENERATE,
    ),
    Option(
        "cache_dir",
        "str",
        None,
        "Cache directory for external dependencies; default: the user cache directory.",
        optional=_GENERATE,
    ),
    Option(
        "offline",
        "bool",
        False,
        "Resolve external dependencies from the cache only; never touch the network.",
        optional=_GENERATE,
    ),
    Option(
        "dependencies",
        "dependencies",
        None,
        "Extra or overriding external dependencies, as a JSON string (same shape as "
        "metadata.json's external_dependencies).",
        optional=_GENERATE,
        # The generator also takes the --dependency form (short_name=...,url=...) and lists.
        api_type="json",
    ),
    Option(
        "allow_archive_paths",
        "bool",
        False,
        "Let the archive's external_dependencies name local paths outside the archive "
        "(path entries, file:// and local git repositories); default: refused.",
        optional=_GENERATE,
    ),
    Option(
        "allowed_hosts",
        "str",
        None,
        "More hosts the archive's git/url dependencies may come from, HOST or HOST/PATH, "
        "comma-separated (beside $MLF_PROJECT_ALLOWED_HOSTS and the allowed_hosts file); "
        "default: the homes of CMSIS-NN and CMSIS 5 only.",
        optional=_GENERATE,
    ),
    Option(
        "allow_dependency_cmake",
        "bool",
        False,
        "Let a dependency the archive names run its own CMakeLists.txt; default: it must "
        "build from a recipe (C sources and include directories).",
        optional=_GENERATE,
    ),
    Option(
        "build_dir",
        "str",
        "build",
        "Build directory, relative to the project directory; default: build.",
        optional=("build", "flash", "open_transport"),
        api_default=None,  # unset: the project's own build directory
    ),
    Option(
        "timeout_sec",
        "float",
        None,
        "Seconds to wait for the firmware to start and answer; default depends on the "
        "board (host 10, QEMU 30, real boards 10).",
        optional=_TRANSPORT,
        api_type="int",  # TVM's option types have no float
    ),
    Option(
        "sandbox",
        "bool",
        True,
        "Confine the model's C while it is built and run (Landlock and seccomp: it reads "
        "nothing of yours, writes only its build directory, reaches no network); false "
        "builds and runs it with this server's rights.",
        optional=("build", "flash", "open_transport"),
        api_default=None,  # unset: $MLF_PROJECT_SANDBOX of the server decides (on)
        generator=False,  # how this run goes, never stored in the project
    ),
    Option(
        "lock_file",
        "str",
        None,
        "A dependencies.lock.json to regenerate the dependencies from.",
    ),
    Option(
        "refresh_dependencies",
        "bool",
        False,
        "Fetch git/url dependencies again (moving branches) instead of reusing the cache "
        "and the project's own lock file.",
    ),
    Option(
        "sample_inputs",
        "str",
        None,
        "Standalone projects: an .npz of sample inputs (and expected outputs).",
    ),
    Option(
        "stack_bytes",
        "int",
        None,
        "Main stack of Cortex-M boards in bytes (at least 1024); default: the board's.",
    ),
    Option(
        "cmake",
        "str",
        None,
        "The cmake executable; default: a system cmake >= 3.20.",
    ),
    Option(
        "mlperftiny_model",
        "str",
        None,
        "MLPerf Tiny projects: the benchmark the firmware reports (m-model-[...]): kws01, "
        "vww01, ad01 or ic01; default: guessed from the model's name, else the name itself.",
        optional=_GENERATE,
    ),
    Option(
        "mlperftiny_name",
        "str",
        None,
        "MLPerf Tiny projects: the name the firmware reports (m-name-dut-[...]); default "
        "mlf-project-api.",
        optional=_GENERATE,
    ),
    Option(
        "mlperftiny_profile",
        "str",
        None,
        "MLPerf Tiny projects: the profile the firmware reports (m-profile-[...]); default "
        "EEMBC's 'ULPMark for tinyML Firmware V0.0.1'.",
        optional=_GENERATE,
    ),
    Option(
        "mlperftiny_energy",
        "bool",
        False,
        "MLPerf Tiny projects: energy mode, timestamps are pulses on the board's timestamp pin "
        "(for the EEMBC energy monitor) instead of m-lap-us- lines.",
        optional=_GENERATE,
    ),
    Option(
        "output_scale",
        "float",
        None,
        "MLPerf Tiny projects: print integer outputs dequantized, output_scale * (q - "
        "output_zero_point), instead of as integers.",
        optional=_GENERATE,
        api_type="str",  # TVM's option types have no float
    ),
    Option(
        "output_zero_point",
        "int",
        None,
        "MLPerf Tiny projects: the zero point that goes with output_scale (default 0).",
        optional=_GENERATE,
    ),
    Option(
        "device_protocol",
        "str",
        "mlf",
        "For host_driven projects: what the firmware answers on its link: mlf (our framed device "
        "protocol: mlf-project run, Project.session) or microtvm (TVM's microTVM RPC server: "
        "tvm.micro.Session, create_local_graph_executor, AotModule, time_evaluator, AutoTVM).",
        choices=DEVICE_PROTOCOLS,
        optional=_GENERATE,
    ),
    Option(
        "device_memory_bytes",
        "int",
        None,
        "For host_driven projects with device_protocol=microtvm: the device memory TVM's host "
        "allocates tensors in; default: every storage pool of the graph models plus 8 KiB (at "
        "least 8 MiB on the host board).",
        optional=_GENERATE,
    ),
    Option(
        "device_graph_executor",
        "bool",
        False,
        "For host_driven projects with device_protocol=microtvm: answer "
        "tvm.graph_executor.create (a graph executor on the device, from a graph JSON the host "
        "sends); costs a receive buffer as large as the graph JSON or params and the "
        "executor's memory. Off: the host runs graphs (create_local_graph_executor).",
        optional=_GENERATE,
    ),
    Option(
        "cmsis_nn",
        "bool",
        False,
        "For a .tflite model: compile its int8 operators to CMSIS-NN v7.0.0 calls, as "
        "`mlf-project compile --cmsis-nn` does (an MLF archive is taken as it is).",
        optional=_GENERATE,
    ),
    Option(
        "profile",
        "bool",
        False,
        "host_driven projects: record the time and workspace of every call of the model's "
        "functions (its C compiled with -finstrument-functions) for `mlf-project profile`. "
        "Off: the firmware holds none of it.",
        # Not advertised over the Project API: TVM's client cannot read the records.
    ),
)


def normalize_options(raw: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Every generator option with its value typed (defaults filled in)."""
    given = dict(raw or {})
    unknown = sorted(k for k in given if k not in OPTIONS)
    if unknown:
        known = sorted(name for name, option in OPTIONS.items() if option.generator)
        raise GenerateError(
            f"unknown option {unknown[0]!r}", hint="known options: " + ", ".join(known)
        )
    result: Dict[str, Any] = {}
    for option in OPTIONS.values():
        if option.generator:
            value = coerce(option.name, option.type, given.get(option.name), option.choices)
            result[option.name] = option.default if value is None else value
    for name in ("workspace_size_bytes", "stack_bytes", "device_memory_bytes"):
        if result[name] is not None and result[name] < 0:
            raise GenerateError(f"option {name}: must be >= 0, got {result[name]}")
        if result[name] is not None and result[name] > MAX_SIZE_BYTES:
            raise GenerateError(
                f"option {name}: {result[name]:,} bytes; the runtime holds sizes in 32 bits "
                f"(at most {MAX_SIZE_BYTES:,})"
            )
    stack = result["stack_bytes"]
    if stack is not None and stack < MIN_STACK_BYTES:
        raise GenerateError(
            f"option stack_bytes: {stack} is below the {MIN_STACK_BYTES} bytes any firmware "
            "needs (the startup code, the loop and the executor's frames)",
            hint="run --json reports stack_bytes_used; give that plus a margin",
        )
    if result["timeout_sec"] is not None and result["timeout_sec"] <= 0:
        raise GenerateError(f"option timeout_sec: must be > 0, got {result['timeout_sec']}")
    return result


# TVM options the command line takes as flags of their own: ``-o`` with these would be ignored.
_FLAG_OPTIONS = {
    "board": "--board",
    "project_type": "--project-type",
    "model": "--model",
    "sandbox": "--no-sandbox",
}


def parse_option_assignments(items: Optional[List[str]]) -> Dict[str, str]:
    """``["KEY=VALUE", ...]`` (the CLI's ``--option``) to a dict."""
    options: Dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GenerateError(f"--option {item!r}: expected KEY=VALUE")
        if key in _FLAG_OPTIONS:
            flag = _FLAG_OPTIONS[key]
            usage = flag if flag.startswith("--no-") else f"{flag} {value}"
            raise GenerateError(f"--option {item!r}: {key} is a flag of its own here: use {usage}")
        if key in options:
            raise GenerateError(
                f"--option {key} given twice ({options[key]!r} and {value!r})",
                hint="give each option once",
            )
        options[key] = value
    return options


__all__ = [
    "DEVICE_PROTOCOLS",
    "GRAPH_FORMATS",
    "MEMORY_PLANS",
    "OPTIONS",
    "PROJECT_TYPES",
    "TYPES",
    "Option",
    "coerce",
    "json_type",
    "normalize_options",
    "parse_compile_definitions",
    "parse_option_assignments",
]
