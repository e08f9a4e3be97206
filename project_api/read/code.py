"""A model's generated code: which files it is, and whether they define what is called.

TVM writes a model's code as C in ``codegen/host/src`` (or objects in ``codegen/host/lib``).
A model without any, or whose C lacks a function the graph or the AOT entry point calls,
would only fail when the firmware links (or, for a graph function missing from the system
library, when it starts), so the reader refuses it. Definitions are found by a conservative
pattern (a name, a parameter list and ``{``): a prototype or the system-lib registry of
``lib0.c``, which only names functions, does not count; anything that looks like a
definition does. When the model ships object files, what they define cannot be seen and
nothing is refused.

Files macOS adds when it re-tars an archive (AppleDouble ``._*`` twins of every file,
``__MACOSX/`` trees, ``.DS_Store``) are never code: :func:`is_junk` keeps them out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Set, Tuple

from ..errors import AotError, GraphError
from .ctext import NAME_PATTERN, sanitize, strip_comments
from .graph_runtime import PSEUDO_FUNCTIONS

if TYPE_CHECKING:
    from .model import Model

SRC_DIR = "codegen/host/src"

# A parameter list (one level of nested parentheses allowed), then the body's opening brace.
_PARAMETERS = r"\((?:[^;{}()]|\([^;{}()]*\))*\)"
_DEFINITION_RE = re.compile(rf"({NAME_PATTERN})\s*{_PARAMETERS}\s*\{{")
# A definition ends at a "{"; only the text up to this far before one (back to a line's start
# within twice that) is searched, so a long stretch without any brace (a comment, data)
# costs a find, not a scan.
_DEFINITION_REACH = 1 << 20
_DIRECTIVE_RE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif|include)\b(.*)$")


def is_junk(name: str) -> bool:
    """An AppleDouble file (``._x``), a ``.DS_Store`` or a member of a ``__MACOSX/`` tree."""
    parts = name.replace("\\", "/").split("/")
    return "__MACOSX" in parts or parts[-1].startswith("._") or parts[-1] == ".DS_Store"


def read_texts(sources: Iterable[Path]) -> Dict[Path, str]:
    return {path: path.read_text(encoding="utf-8", errors="replace") for path in sources}


def defined_functions(texts: Iterable[str]) -> Set[str]:
    """Every name that some text appears to define (a superset: ``if (x) {`` yields ``if``)."""
    found: Set[str] = set()
    for text in texts:
        for start, end in _spans_before_braces(text):
            found.update(_DEFINITION_RE.findall(text, start, end))
    return found


def _spans_before_braces(text: str) -> List[Tuple[int, int]]:
    """Disjoint (start, end) spans of ``text`` holding every stretch that ends at a ``{`` and
    reaches back :data:`_DEFINITION_REACH` characters (on to the start of that line, if it
    starts within twice that).
    Braces closer together than that share a span, found a reach at a time (a text of braces
    takes len / reach steps, not one per brace)."""
    spans: List[Tuple[int, int]] = []
    brace = text.find("{")
    while brace >= 0:
        reach = max(0, brace - _DEFINITION_REACH)
        line = text.rfind("\n", max(0, brace - 2 * _DEFINITION_REACH), reach)
        start = line + 1 if line >= 0 or reach <= _DEFINITION_REACH else reach
        if spans and start <= spans[-1][1]:
            start = spans.pop()[0]
        while True:  # the last brace within reach of this one joins its span
            further = text.rfind("{", brace + 1, brace + 1 + _DEFINITION_REACH)
            if further < 0:
                break
            brace = further
        spans.append((start, brace + 1))
        brace = text.find("{", brace + 1)
    return spans


def _listing(model: Model) -> str:
    names = ", ".join(path.name for path in model.sources)
    return f"{SRC_DIR} ({names})"


def uses_arm_dsp(texts: Iterable[str]) -> bool:
    """Whether the C includes ``<arm_acle.h>`` outside any ``#if`` about the Arm target:
    TVM's Cortex-M micro-kernels (targets with ``-mcpu=cortex-m4`` and other DSP cores) call
    its DSP intrinsics unguarded, so the code builds only for an Arm core with the DSP
    extension."""
    return any("arm_acle.h" in text and _unguarded_acle(strip_comments(text)) for text in texts)


def _unguarded_acle(text: str) -> bool:
    open_conditions: List[bool] = []  # per open #if: whether it is about the Arm target
    for line in text.splitlines():
        directive = _DIRECTIVE_RE.match(line)
        if directive is None:
            continue
        word, rest = directive.groups()
        if word.startswith("if"):
            open_conditions.append("__ARM" in rest or "__arm" in rest)
        elif word == "endif" and open_conditions:
            open_conditions.pop()
        elif word == "include" and "arm_acle.h" in rest and not any(open_conditions):
            return True
    return False


def require_graph_functions(model: Model, texts: Mapping[Path, str]) -> None:
    """Every function a graph node calls (``__nop``/``__copy`` aside) is defined in the
    model's C (``texts``, by path); nothing is checked when the model also has object
    files."""
    graph = model.graph
    if graph is None or model.objects:
        return
    defined = defined_functions(texts.values())
    for nid, node in graph.op_nodes():
        func = node.func_name
        if func not in PSEUDO_FUNCTIONS and func not in defined:
            raise GraphError(
                graph.member,
                f"nodes[{nid}].attrs.func_name",
                f"{func!r} is defined in none of the model's sources in {_listing(model)}",
            )


def require_aot_functions(model: Model, texts: Mapping[Path, str]) -> None:
    """Every function of the model (``tvmgen_<mod>_...``) that its C (``texts``, by path)
    declares or calls as a statement (``__tvm_main__``, which ``tvmgen_<mod>_run`` calls, and
    the operators) is defined in it; nothing is checked when the model also has object
    files."""
    if model.objects:
        return
    defined = defined_functions(texts.values())
    prefix = "tvmgen_" + sanitize(model.name) + "_"
    named = re.compile(rf"\b({re.escape(prefix)}\w+)\s*{_PARAMETERS}\s*;")
    for path, text in texts.items():
        for name in named.findall(strip_comments(text)):
            if name not in defined:
                raise AotError(
                    f"{SRC_DIR}/{path.name}",
                    name,
                    f"is declared or called here but defined in none of the model's sources in "
                    f"{_listing(model)}",
                )


def code_listing(root: Path) -> List[str]:
    """What ``codegen/host/src`` holds (junk aside), for messages."""
    folder = root / SRC_DIR
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and not is_junk(p.name))
