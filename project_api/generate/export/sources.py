"""The ``src/`` folder of an export: the runtime, each model's generated C (renamed under the
model's prefix) and params, the model's C API (``<name>.h``/``<name>.c``).

Everything lives under ``src/`` and is a ``.c`` or ``.h`` file, so that every build system
the folder is packaged for finds it with ``src/`` as the one include directory (Arduino
compiles ``src/`` recursively and adds nothing else): the runtime's headers at its top
(``mlf_runtime.h``, ``tvm/``, ``dlpack/``), the runtime's sources in ``src/mlf_runtime/``,
model ``<name>``'s code flattened into ``src/<name>/`` with its headers beside it. Settings
that a generated project passes with ``-D`` travel in the files themselves: a prologue
naming the model's functions ``<name>_...`` (two exports of models TVM named alike link into
one firmware) and ``mlf_runtime/mlf_export_config.h``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Set

from ...errors import GenerateError
from ...read.code import is_junk
from ...resources import crt_dir, template_dir
from ..plan import ModelPlan
from ..render import JSON_ONLY, NOT_COMPILED

RUNTIME_DIR = "mlf_runtime"
CONFIG_HEADER = "mlf_export_config.h"
PLATFORM_SOURCE = "mlf_export_platform.c"
# Runtime files an exported library never needs: TVM's graph-executor API (it allocates),
# the platform hooks over a board (printf, console: the export has weak defaults instead)
# and the JSON parser (the export binds const tables).
_RUNTIME_LEFT_OUT = NOT_COMPILED | {"mlf_tvm_platform.c"} | JSON_ONLY
_HEADERS_LEFT_OUT = {"mlf_platform.h"}
# Warnings TVM's generated C gives under -Wall -Wextra; it is compiled as it is, so a user's
# -Werror must not stop it. (GCC and clang read the same pragma.)
_MODEL_WARNINGS = (
    "pragmas",  # first: a name one compiler does not know is no error
    "unknown-warning-option",
    "unused-parameter",
    "unused-const-variable",
    "unused-label",
    "unused-value",
    "type-limits",
    "maybe-uninitialized",
    "uninitialized",
    "implicit-fallthrough",
    "parentheses",
    "strict-aliasing",
    "cast-function-type",
    "int-in-bool-context",
    "switch-bool",
    "incompatible-pointer-types",
    "discarded-qualifiers",
    "pointer-sign",
    "unused-variable",
    "unused-but-set-variable",
    "unused-function",
    "sign-compare",
    "missing-field-initializers",
    "pedantic",
)


def write_runtime(src: Path) -> List[str]:
    """The runtime's headers at the top of ``src/``, its sources in ``src/mlf_runtime/``,
    each opening with the export's configuration."""
    crt = crt_dir()
    include = crt / "include"
    for path in sorted(include.rglob("*.h")):
        rel = path.relative_to(include)
        if rel.as_posix() in _HEADERS_LEFT_OUT:
            continue
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, src / rel)
    runtime = src / RUNTIME_DIR
    runtime.mkdir(parents=True, exist_ok=True)
    (runtime / CONFIG_HEADER).write_text(_config_header())
    sources = []
    for path in sorted((crt / "src").iterdir()):
        if path.suffix == ".h":
            shutil.copyfile(path, runtime / path.name)
        elif path.suffix == ".c" and path.name not in _RUNTIME_LEFT_OUT:
            text = path.read_text(encoding="utf-8")
            (runtime / path.name).write_text(f'#include "{CONFIG_HEADER}"\n{text}')
            sources.append(f"src/{RUNTIME_DIR}/{path.name}")
    shutil.copyfile(template_dir() / "export" / PLATFORM_SOURCE, runtime / PLATFORM_SOURCE)
    sources.append(f"src/{RUNTIME_DIR}/{PLATFORM_SOURCE}")
    return sources


def _config_header() -> str:
    # On a microcontroller the const tables are not checked again at start-up (the generator
    # checked them; about 500 B of code), as in a generated project; under an operating system
    # the check stays. The compiler tells which, so that one folder builds for both.
    return "\n".join(
        [
            "/* How the runtime of an exported model library is built (-D on the compiler's",
            " * command line overrides each). */",
            "#ifndef MLF_EXPORT_CONFIG_H_",
            "#define MLF_EXPORT_CONFIG_H_",
            "/* status texts: the C API has its own (<name>_status_str) */",
            "#ifndef MLF_ERROR_TEXT",
            "#define MLF_ERROR_TEXT 0",
            "#endif",
            "/* the const tables checked again at start-up: under an operating system only */",
            "#ifndef MLF_CHECK_LINKED_TABLES",
            "#if defined(__unix__) || defined(__APPLE__) || defined(_WIN32)",
            "#define MLF_CHECK_LINKED_TABLES 1",
            "#else",
            "#define MLF_CHECK_LINKED_TABLES 0",
            "#endif",
            "#endif",
            "#endif",
            "",
        ]
    )


def write_model_code(
    src: Path, plan: ModelPlan, name: str, calls: Optional[Dict[str, str]] = None
) -> List[str]:
    """The model's C and headers flattened into ``src/<name>/``, every source opening with
    ``<name>_renames.h`` (the plan's renames, and ``calls``: TVM's calls the CMSIS-NN adapter
    takes over); returns the sources (relative to the export's root)."""
    model = plan.model
    if model.objects:
        raise GenerateError(
            f"model {model.name!r} comes with object files ({model.objects[0].name}, ...), "
            "which no exported package can carry",
            hint="export from an archive that holds the model's C sources",
        )
    folder = src / name
    folder.mkdir(parents=True, exist_ok=True)
    placed: Dict[str, Path] = {}

    def place(path: Path, target_name: str) -> Path:
        other = placed.get(target_name)
        if other is not None and other != path:
            raise GenerateError(
                f"model {model.name!r}: two of its files are both called {target_name} "
                f"({other.relative_to(model.root)}, {path.relative_to(model.root)})",
                hint="the export flattens the model's code into one folder",
            )
        placed[target_name] = path
        return folder / target_name

    headers = [h for d in model.include_dirs for h in sorted(Path(d).rglob("*.h"))]
    headers += [h for s in model.sources for h in sorted(s.parent.glob("*.h"))]
    headers = [h for h in headers if not is_junk(h.name)]
    own = {h.name for h in headers}
    for header in headers:
        text = header.read_text(encoding="utf-8", errors="replace")
        place(header, header.name).write_text(_quoted_includes(text, own))
    renames_header = f"{name}_renames.h"
    renames = {**plan.renames, **(calls or {})}
    (folder / renames_header).write_text(_renames_header(name, renames))
    sources = []
    for source in model.sources:
        target_name = source.name if source.suffix == ".c" else f"{source.stem}.cpp"
        target = place(source, target_name)
        text = _quoted_includes(source.read_text(encoding="utf-8", errors="replace"), own)
        target.write_text(f'#include "{renames_header}"\n{text}')
        sources.append(f"src/{name}/{target_name}")
    return sources


_ANGLE_INCLUDE = re.compile(r"^([ \t]*#[ \t]*include[ \t]*)<([^>/\n]+)>", re.MULTILINE)


def _quoted_includes(text: str, own: Set[str]) -> str:
    """``#include <tvmgen_x.h>`` of one of the model's own headers, which TVM reaches through
    an include directory, as a quoted include: the header now sits beside the file."""
    return _ANGLE_INCLUDE.sub(
        lambda m: f'{m.group(1)}"{m.group(2)}"' if m.group(2) in own else m.group(0), text
    )


def _renames_header(name: str, renames: Dict[str, str]) -> str:
    guard = f"{name.upper()}_RENAMES_H_"
    lines = [
        f"/* Model {name}'s C under its own prefix, so that models TVM named alike link into one",
        " * firmware; and TVM's generated C compiled as it is, whatever the user's warnings. */",
        f"#ifndef {guard}",
        f"#define {guard}",
    ]
    lines += [f"#define {old} {new}" for old, new in sorted(renames.items())]
    lines += warning_pragmas() + ["#endif", ""]
    return "\n".join(lines)


def warning_pragmas() -> List[str]:
    """Lines that silence the warnings of code compiled as it is (TVM's, CMSIS-NN's)."""
    lines = [
        "#if defined(__clang__)",
        '#pragma clang diagnostic ignored "-Wunknown-warning-option"',
    ]
    lines += ["#endif", "#if defined(__GNUC__) || defined(__clang__)"]
    lines += [f'#pragma GCC diagnostic ignored "-W{w}"' for w in _MODEL_WARNINGS]
    return lines + ["#endif"]


def write_params(src: Path, plan: ModelPlan, name: str) -> List[str]:
    """The params blob as a const C array in flash, 64-byte aligned (the const tables bind
    tensors in it where they lie)."""
    if not plan.params_blob:
        return []
    symbol = f"mlf_params_{plan.c_name}"
    data = plan.params_blob
    rows = []
    for at in range(0, len(data), 24):
        rows.append("  " + ",".join(f"0x{b:02x}" for b in data[at : at + 24]) + ",")
    lines = [
        f"/* The params of model {name}: {len(data)} bytes, read where they lie in flash. */",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        "#if defined(__GNUC__) || defined(__clang__)",
        "#define MLF_PARAMS_ALIGNED __attribute__((aligned(64)))",
        "#else",
        "#define MLF_PARAMS_ALIGNED",
        "#endif",
        f"extern const uint8_t {symbol}[{len(data)}];",
        f"extern const size_t {symbol}_bytes;",
        f"const uint8_t {symbol}[{len(data)}] MLF_PARAMS_ALIGNED = {{",
        *rows,
        "};",
        f"const size_t {symbol}_bytes = sizeof({symbol});",
        "",
    ]
    path = src / name / f"{name}_params.c"
    path.write_text("\n".join(lines))
    return [f"src/{name}/{path.name}"]
