"""Hostile text against every regular expression that reads an archive's text, a dependency
tree's text (CMSIS-NN's headers and sources) or what the model's code makes a tool print
(build logs, linker maps, the firmware's console), and against the readers built on them
(issue 41, part 6).

Each case is one pattern (or one reader) and one input made here in memory: a 1 MiB line of
identifier characters, of blanks, of ``a(``; 1 MiB of line breaks; ``// /*`` lines; nested
comments; 10 M braces; and for each pattern a near miss of its own, repeated to 1 MiB (what
it almost matches: the classic trigger of backtracking). Every case must finish within
:data:`SECONDS` on a loaded 2-core machine. :func:`cases` lists them for
tests/test_text_bounds.py and bench part 8 (bench/hostile.py), which prints each one's time.

The patterns are collected from the modules in :data:`MODULES`, so a pattern added there
is tested from then on: it needs a near miss in tests/text_patterns.py (a missing one fails).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from text_patterns import FEWER_BRACES, LEFT_OUT, LINE_SEARCH, LINES, MODES, NEAR_MISS, SCAN, VALUE

from project_api.errors import MlfProjectError

SECONDS = 2.0
MIB = 1 << 20

# Packages and modules whose patterns read untrusted text.
MODULES = (
    "project_api.read",
    "project_api.resolve",
    "project_api.cmsis_nn",
    "project_api.generate",
    "project_api.footprint",
    "project_api.modelgen",
    "project_api.build",
    "project_api.transport",
    "project_api.run",
    "project_api.serve",
    "project_api.jsontext",
)


@dataclass(frozen=True)
class Case:
    """One pattern or reader (``what``) against one input (``given``, made by ``make``)."""

    what: str
    given: str
    make: Callable[[], str]
    apply: Callable[[str], object]

    @property
    def name(self) -> str:
        return f"{self.what} | {self.given}"


# --- inputs --------------------------------------------------------------------------------


def repeated(unit: str) -> str:
    """``unit`` repeated to 1 MiB."""
    return unit * max(1, MIB // len(unit))


GENERIC: Dict[str, Callable[[], str]] = {
    "a 1 MiB line of identifier characters": lambda: "a" * MIB,
    "a 1 MiB line of blanks": lambda: repeated(" \t"),
    "a 1 MiB line of a(": lambda: repeated("a("),
    "1 MiB of line breaks": lambda: "\n" * MIB,
    "1 MiB of // /* lines": lambda: repeated("// /*\n"),
    "nested comments, 1 MiB": lambda: "/*" * (MIB // 4) + "*/" * (MIB // 4),
}
ONE_LINE = [given for given in GENERIC if "line of" in given]
BRACES = "10 M braces"  # 10 MiB of "{"


@functools.cache
def text_of(given: str) -> str:
    """The input ``given``: a :data:`GENERIC` or :data:`READER_INPUTS` name."""
    if given == BRACES:
        return "{" * (10 * MIB)
    return GENERIC[given]() if given in GENERIC else READER_INPUTS[given]()


# --- patterns ------------------------------------------------------------------------------


def _modules() -> List[object]:
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        found.append(module)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + "."):
            found.append(importlib.import_module(info.name))
    return found


def patterns() -> Dict[str, re.Pattern]:
    """Every module-level compiled pattern of :data:`MODULES`, by the name of the module that
    compiles it (``project_api.read.relay.LET_RE``; not where it is imported too)."""
    found: Dict[str, re.Pattern] = {}
    for module in _modules():
        source = inspect.getsource(module)  # type: ignore[arg-type]
        for attribute, value in vars(module).items():
            if isinstance(value, re.Pattern) and re.search(
                rf"^{re.escape(attribute)}\s*=\s*re\.compile", source, re.MULTILINE
            ):
                found[f"{module.__name__}.{attribute}"] = value  # type: ignore[attr-defined]
    return {k: v for k, v in found.items() if k not in LEFT_OUT}


def applier(name: str, pattern: re.Pattern) -> Callable[[str], object]:
    """How the module applies ``pattern`` (:data:`MODES`); a scan finds every match as
    ``finditer`` does (in C: the time is the engine's, not this loop's)."""
    mode = MODES.get(name, SCAN)
    if mode == LINES:
        return lambda text: [pattern.match(line) for line in text.splitlines()]
    if mode == LINE_SEARCH:
        return lambda text: [pattern.search(line) for line in text.splitlines()]
    if mode == VALUE:
        return lambda text: (pattern.match(text), pattern.fullmatch(text))
    return lambda text: pattern.subn("", text)[1]


def pattern_cases() -> List[Case]:
    """Each pattern against each generic input, its near miss, and (where it looks for a
    brace over a whole text) 10 M braces. A pattern applied to one line or one value at a
    time meets its worst in one long line: it gets the one-line inputs only."""
    cases = []
    for name, pattern in sorted(patterns().items()):
        short = name.replace("project_api.", "")
        apply = applier(name, pattern)
        whole = MODES.get(name, SCAN) == SCAN
        for given in GENERIC if whole else ONE_LINE:
            cases.append(Case(short, given, functools.partial(text_of, given), apply))
        unit = NEAR_MISS.get(name)
        if unit is None:
            cases.append(Case(short, "near miss (none given)", _no_near_miss(name), apply))
        elif whole:
            cases.append(Case(short, f"near miss {unit!r}", lambda u=unit: repeated(u), apply))
        else:
            line = unit.replace("\n", "")
            cases.append(
                Case(short, f"near miss {line!r}, one line", lambda u=line: repeated(u), apply)
            )
        if _reads_braces(pattern) and whole and name not in FEWER_BRACES:
            cases.append(Case(short, BRACES, functools.partial(text_of, BRACES), apply))
    return cases


def _reads_braces(pattern: re.Pattern) -> bool:
    """Whether ``pattern`` looks for a brace (``\\{``, or one in a character class), not
    just counts with one (``{0,63}``)."""
    return re.search(r"\\[{}]|\[[^\]]*[{}]", pattern.pattern) is not None


def _no_near_miss(name: str) -> Callable[[], str]:
    def make() -> str:
        raise AssertionError(f"{name}: give it a near miss in tests/text_patterns.py NEAR_MISS")

    return make


# --- readers -------------------------------------------------------------------------------


@functools.cache
def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="mlf-text-bounds-"))


def _file(text: str, name: str = "lib0.c") -> Path:
    """``text`` in a file of a scratch folder of its own."""
    folder = Path(tempfile.mkdtemp(dir=_scratch()))
    path = folder / name
    path.write_text(text)
    return path


def _refusal_ok(reader: Callable[[str], object]) -> Callable[[str], object]:
    """A reader may refuse the text (in one of this package's errors) or accept it."""

    def apply(text: str) -> object:
        try:
            return reader(text)
        except (MlfProjectError, ValueError) as err:  # ValueError: JSONDecodeError
            return err

    return apply


def _readers() -> List[Tuple[str, Callable[[str], object]]]:
    from project_api.build.cmake import parse_memory_usage
    from project_api.build.summary import failure_lines
    from project_api.cmsis_nn.calls import find_cmsis_nn_calls
    from project_api.cmsis_nn.release import read_tree
    from project_api.cmsis_nn.sources import called_functions, needed_sources
    from project_api.footprint.linked import classify, walk_linker_map
    from project_api.generate.operator_workspace import read_functions
    from project_api.generate.registry import (
        defined_functions as registry_defined,
    )
    from project_api.generate.registry import (
        defines_system_library,
        registered_functions,
    )
    from project_api.generate.sizes import function_allocations, linker_overflow
    from project_api.jsontext import parse_json
    from project_api.read.aot import read_aot
    from project_api.read.code import defined_functions, uses_arm_dsp
    from project_api.read.ctext import strip_comments
    from project_api.read.mblob import mblob_from_c_source
    from project_api.read.relay import main_signature, result_shapes
    from project_api.resolve.detect import find_cmsis_nn_uses
    from project_api.transport.eembc import errors_in, parse_results
    from project_api.transport.reasons import explain, runtime_text

    def aot(text: str) -> object:
        header = _file(text, "tvmgen_m.h")
        root = header.parent / "root"
        (root / "codegen/host/include").mkdir(parents=True)
        header.rename(root / "codegen/host/include/tvmgen_m.h")
        return read_aot(root, "m", {root / "lib0.c": text}, [], [], 0)

    def cmsis_tree(text: str) -> object:
        """A tree whose main header and one source are ``text``."""
        root = _file(text, "arm_nnfunctions.h").parent
        (root / "Include").mkdir()
        (root / "arm_nnfunctions.h").rename(root / "Include" / "arm_nnfunctions.h")
        for header in ("arm_nn_types.h", "arm_nnsupportfunctions.h"):
            (root / "Include" / header).write_text("/* $Revision: V.1.0.0 */\n")
        (root / "Source").mkdir()
        (root / "Source" / "a.c").write_text(text)
        read_tree(root)
        return needed_sources(root, ["Source/a.c"], ["Include"], ["arm_x"])

    return [
        ("read.ctext.strip_comments", lambda t: strip_comments(t, line_comments=True)),
        ("read.code.defined_functions", lambda t: defined_functions([t])),
        ("read.code.uses_arm_dsp", lambda t: uses_arm_dsp(["arm_acle.h\n" + t])),
        ("read.aot.read_aot", aot),
        ("read.relay.main_signature", main_signature),
        ("read.relay.result_shapes", lambda t: result_shapes("def @main(%x) {\n" + t, [1])),
        ("read.mblob.mblob_from_c_source", mblob_from_c_source),
        ("jsontext.parse_json", parse_json),
        ("generate.sizes.function_allocations", lambda t: function_allocations([_file(t)])),
        ("generate.sizes.linker_overflow", linker_overflow),
        ("generate.registry.defined_functions", lambda t: registry_defined([_file(t)])),
        ("generate.registry.registered_functions", lambda t: registered_functions([_file(t)])),
        ("generate.registry.defines_system_library", lambda t: defines_system_library([_file(t)])),
        ("generate.operator_workspace.read_functions", lambda t: read_functions([_file(t)])),
        ("cmsis_nn.calls.find_cmsis_nn_calls", lambda t: find_cmsis_nn_calls([_file(t)])),
        ("cmsis_nn.sources.called_functions", lambda t: called_functions([t])),
        ("cmsis_nn.sources/release: a tree", cmsis_tree),
        ("resolve.detect.find_cmsis_nn_uses", lambda t: find_cmsis_nn_uses([_file(t)])),
        ("build.summary.failure_lines", failure_lines),
        ("build.cmake.parse_memory_usage", parse_memory_usage),
        ("footprint.linked.walk_linker_map", walk_linker_map),
        ("footprint.linked.classify", lambda t: classify(t, ".text")),
        ("transport.eembc.parse_results", lambda t: parse_results("m-results-[" + t + "]")),
        ("transport.eembc.errors_in", lambda t: errors_in(t.splitlines())),
        ("transport.reasons.explain", explain),
        ("transport.reasons.runtime_text", runtime_text),
    ]


_CALL = (
    "  cmsis_nn_dims input_dims = {1, 2, 3, 4};\n  arm_cmsis_nn_status status = "
    "arm_convolve_wrapper_s8(&context, &conv_params, &quant_params, &input_dims, input_, "
    "&filter_dims, filter_, &bias_dims, bias_, &output_dims, output_);\n"
)
# Inputs of the readers beyond GENERIC: what each kind of reader meets at its worst.
READER_INPUTS: Dict[str, Callable[[], str]] = {
    "1 MiB of unclosed calls: arm_a(b": lambda: repeated("arm_status status = arm_a(b\n"),
    "1 MiB of a( ( on lines that open functions": lambda: repeated("a(b) {\n x(\n"),
    "1 MiB line: a long name before a call": lambda: "a" * MIB + " b() {\n}\n",
    "1 MiB of (((": lambda: "(" * MIB,
    "1 MiB of TVM calls without their end": lambda: repeated("TVMBackendAllocWorkspace(1, "),
    "1 MiB of #define arm_ lines, continued": lambda: repeated("#define arm_a b \\\n"),
    "1 MiB of Tensor[( in a signature": lambda: "def @main(" + repeated("%a: Tensor[(1, "),
    "1 MiB of JSON strings unclosed": lambda: '["' + repeated('\\"'),
    "1 MiB of a prototype, unclosed": lambda: repeated("arm_vector_sum_s8(int a "),
    "a function of 1 MiB of CMSIS-NN calls": lambda: "int32_t f(void) {\n" + repeated(_CALL),
}
# The readers each of them is for (by the start of their names); every reader gets GENERIC
# and 10 M braces.
_C_FUNCTIONS = ("read.code", "generate.", "cmsis_nn.calls", "cmsis_nn.sources")
READER_TARGETS: Dict[str, Tuple[str, ...]] = {
    "1 MiB of unclosed calls: arm_a(b": ("read.code", "resolve.", "cmsis_nn."),
    "1 MiB of a( ( on lines that open functions": _C_FUNCTIONS,
    "1 MiB line: a long name before a call": _C_FUNCTIONS,
    "1 MiB of (((": ("read.", "footprint.", "jsontext."),
    "1 MiB of TVM calls without their end": ("generate.",),
    "1 MiB of #define arm_ lines, continued": ("read.", "resolve.", "cmsis_nn."),
    "1 MiB of Tensor[( in a signature": ("read.relay",),
    "1 MiB of JSON strings unclosed": ("jsontext.",),
    "1 MiB of a prototype, unclosed": ("cmsis_nn.sources",),
    "a function of 1 MiB of CMSIS-NN calls": ("read.code", "resolve.", "cmsis_nn."),
}


def reader_cases() -> List[Case]:
    """Each reader against each generic input, 10 M braces, and those of
    :data:`READER_INPUTS` that are for it."""
    return [
        Case(what, given, functools.partial(text_of, given), _refusal_ok(reader))
        for what, reader in _readers()
        for given in [*GENERIC, BRACES, *READER_INPUTS]
        if given not in READER_TARGETS or what.startswith(READER_TARGETS[given])
    ]


# --- the AOT reader: texts of many items, each once looked for in the whole text --------

AOT_ITEMS = 20_000


def _aot_header(count: int) -> str:
    """A C-interface header of ``count`` inputs, each with its size macro (about 1.5 MiB)."""
    fields = "".join(f"  void* i{n};\n" for n in range(count))
    sizes = "".join(f"#define TVMGEN_M_I{n}_SIZE 4\n" for n in range(count))
    return (
        "int32_t tvmgen_m_run(struct tvmgen_m_inputs* inputs, struct tvmgen_m_outputs* o);\n"
        f"struct tvmgen_m_inputs {{\n{fields}}};\nstruct tvmgen_m_outputs {{\n  void* y;\n}};\n"
        f"{sizes}#define TVMGEN_M_WORKSPACE_SIZE 0\n"
    )


def _aot_packed(count: int) -> str:
    """A packed-interface source naming ``count`` inputs in its metadata table."""
    names = "".join(f'  "i{n}" /* name */,\n' for n in range(count))
    shapes = "".join(
        f"static const int64_t kTvmgenMetadata_inputs_{n}_shape[1] = {{1L}};\n"
        for n in range(count)
    )
    return (
        "int32_t tvmgen_m_run(TVMValue* args, int* codes, int n) {\n  return 0;\n}\n"
        f"{shapes}static const TVMTensorInfo kTvmgenMetadata_inputs[{count}] = {{\n{names}}};\n"
    )


def _read_aot_of(header: bool) -> Callable[[str], object]:
    from project_api.read.aot import read_aot
    from project_api.read.model import TensorSpec

    def apply(text: str) -> object:
        root = Path(tempfile.mkdtemp(dir=_scratch()))
        if header:
            (root / "codegen/host/include").mkdir(parents=True)
            (root / "codegen/host/include/tvmgen_m.h").write_text(text)
            source = (
                "int32_t tvmgen_m_run(struct tvmgen_m_inputs* a, struct tvmgen_m_outputs* b) {}"
            )
        else:
            source = text
        inputs = [TensorSpec(f"i{n}", (1,), "float32") for n in range(AOT_ITEMS)]
        outputs = [TensorSpec("y", (1,), "float32")]
        return read_aot(root, "m", {root / "lib0.c": source}, inputs, outputs, 0)

    return _refusal_ok(apply)


def aot_cases() -> List[Case]:
    return [
        Case("read.aot.read_aot", f"a header of {AOT_ITEMS:,} inputs and their size macros",
             lambda: _aot_header(AOT_ITEMS), _read_aot_of(header=True)),
        Case("read.aot.read_aot", f"a packed source naming {AOT_ITEMS:,} inputs",
             lambda: _aot_packed(AOT_ITEMS), _read_aot_of(header=False)),
    ]  # fmt: skip


def cases() -> List[Case]:
    """Every case: each pattern against each input, then each reader."""
    return pattern_cases() + reader_cases() + aot_cases()


def timed(case: Case) -> float:
    """Seconds ``case`` takes (its input made before the clock starts)."""
    text = case.make()
    started = time.perf_counter()
    case.apply(text)
    return time.perf_counter() - started
