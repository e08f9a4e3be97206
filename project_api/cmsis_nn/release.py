"""Which CMSIS-NN a resolved tree is, read from what it contains, and what its API means for
the calls TVM 0.12-0.18 generated.

**The release.** A checkout carries no version number (``ARM.CMSIS-NN.pdsc`` says 0.0.0 between
packs), but every public header states its own revision (``$Revision: V.18.0.0``), raised with
each change to it (CMSIS-NN's CI checks that since 2024) and never lowered. The revisions of
``arm_nnfunctions.h``, ``arm_nn_types.h`` and ``arm_nnsupportfunctions.h`` identify every
release (:data:`RELEASES`); a checkout between two releases has each revision between theirs,
and is named so ("between v6.0.0 and v7.0.0"). Older, newer, mixed or missing revisions are
outside what was verified.

**The API facts** that decide what TVM's v4.1.0-era calls mean are read from the headers
themselves, so that a checkout between releases gets the behaviour it has (:class:`ApiFacts`):
whether ``arm_fully_connected_s8`` wants kernel sums (``arm_vector_sum_s8`` is declared: plain row
sums; with a ``rhs_offset`` parameter: bias + input_offset * row sum, v7.0.0's "effective bias"),
whether ``arm_convolve_wrapper_s16`` takes ``cmsis_nn_bias_data``, whether the depthwise wrapper
turns one input channel into a convolution itself on MVE. Every entry point TVM calls and their
``*_get_buffer_size`` functions must also have one of the prototypes the adapter knows.

A tree is **covered** when its release is one of :data:`RELEASES` or between two of them and
every prototype is known. TVM 0.14's calls run on a covered tree through the adapter
(``crt/cmsis_nn/``) with their v4.1.0 meaning; on any other tree they are refused before
building (``adapter.refuse_uncovered``).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..read.ctext import search_at_word_start, strip_comments

Version = Tuple[int, ...]

# The headers whose revisions identify a release, in this order.
HEADERS = ("arm_nnfunctions.h", "arm_nn_types.h", "arm_nnsupportfunctions.h")


@dataclass(frozen=True)
class Release:
    name: str
    revisions: Tuple[Version, Version, Version]
    in_ci: bool = True  # a tag of the repository CI tests (../shared/deps/CMSIS-NN.git)


# Verified: TVM's KWS archives (graph, AOT + USMP) and the call-coverage model bit-exact through
# the adapter (tests/test_cmsis_nn_releases.py for the tags; main by hand, see dependencies.md).
RELEASES: Tuple[Release, ...] = (
    Release("v4.1.0", ((11, 3, 0), (2, 5, 0), (16, 0, 0))),
    Release("23.08", ((11, 3, 0), (2, 5, 0), (17, 0, 0))),
    Release("v5.0.0", ((12, 4, 0), (2, 6, 0), (17, 6, 0))),
    Release("24.02", ((13, 0, 0), (3, 0, 0), (18, 1, 0))),
    Release("v6.0.0", ((16, 0, 0), (3, 2, 0), (22, 0, 0))),
    Release("v7.0.0", ((18, 0, 0), (3, 5, 0), (22, 7, 0))),
    Release("main of 2026-07-15 (99f736a6)", ((19, 1, 0), (3, 6, 1), (22, 11, 0)), in_ci=False),
)
# Known but not covered: named in messages.
OLDER = (Release("v4.0.0", ((11, 2, 0), (2, 2, 0), (14, 0, 0)), in_ci=False),)
# What TVM 0.12-0.18 generated their calls for.
TVM_TARGET_RELEASE = "v4.1.0"

_WORD_CHARACTERS = string.ascii_letters + string.digits + "_"
_REVISION = re.compile(r"\$Revision:\s*V?\.?\s*(\d+(?:\.\d+)*)")

# --- the prototypes TVM's calls need (types only, as normalised by _signature) ---------------
_CTX, _DIMS, _PC, _PT = (
    "const cmsis_nn_context*",
    "const cmsis_nn_dims*",
    "const cmsis_nn_per_channel_quant_params*",
    "const cmsis_nn_per_tensor_quant_params*",
)
_I32 = "const int32_t"


def _kernel(params: str, quant: str, t: str, bias: str) -> Tuple[str, ...]:
    return (_CTX, params, quant, _DIMS, f"const {t}*", _DIMS, "const int8_t*", _DIMS, bias,
            _DIMS, f"{t}*")  # fmt: skip


def _pool(t: str) -> Tuple[str, ...]:
    return (_CTX, "const cmsis_nn_pool_params*", _DIMS, f"const {t}*", _DIMS, _DIMS, f"{t}*")


_SIZE4 = (_DIMS, _DIMS, _DIMS)
KNOWN_SIGNATURES: Dict[str, Tuple[Tuple[str, ...], ...]] = {
    "arm_convolve_wrapper_s8": (
        _kernel("const cmsis_nn_conv_params*", _PC, "int8_t", "const int32_t*"),
    ),
    "arm_convolve_wrapper_s16": (
        _kernel("const cmsis_nn_conv_params*", _PC, "int16_t", "const int64_t*"),
        _kernel("const cmsis_nn_conv_params*", _PC, "int16_t", "const cmsis_nn_bias_data*"),
    ),
    "arm_depthwise_conv_wrapper_s8": (
        _kernel("const cmsis_nn_dw_conv_params*", _PC, "int8_t", "const int32_t*"),
    ),
    "arm_depthwise_conv_wrapper_s16": (
        _kernel("const cmsis_nn_dw_conv_params*", _PC, "int16_t", "const int64_t*"),
    ),
    "arm_fully_connected_s8": (
        _kernel("const cmsis_nn_fc_params*", _PT, "int8_t", "const int32_t*"),
    ),
    "arm_fully_connected_s16": (
        _kernel("const cmsis_nn_fc_params*", _PT, "int16_t", "const int64_t*"),
    ),
    "arm_avgpool_s8": (_pool("int8_t"),),
    "arm_avgpool_s16": (_pool("int16_t"),),
    "arm_max_pool_s8": (_pool("int8_t"),),
    "arm_max_pool_s16": (_pool("int16_t"),),
    "arm_softmax_s8": (("const int8_t*",) + (_I32,) * 5 + ("int8_t*",),),
    "arm_softmax_s16": (
        ("const int16_t*",) + (_I32,) * 4 + ("const cmsis_nn_softmax_lut_s16*", "int16_t*"),
    ),
    "arm_elementwise_add_s8": (("const int8_t*",) * 2 + (_I32,) * 7 + ("int8_t*",) + (_I32,) * 6,),
    "arm_elementwise_add_s16": (
        ("const int16_t*",) * 2 + (_I32,) * 7 + ("int16_t*",) + (_I32,) * 6,
    ),
    "arm_elementwise_mul_s8": (("const int8_t*",) * 2 + (_I32,) * 2 + ("int8_t*",) + (_I32,) * 6,),
    "arm_elementwise_mul_s16": (
        ("const int16_t*",) * 2 + (_I32,) * 2 + ("int16_t*",) + (_I32,) * 6,
    ),
    "arm_convolve_wrapper_s8_get_buffer_size": (("const cmsis_nn_conv_params*",) + _SIZE4,),
    "arm_convolve_wrapper_s16_get_buffer_size": (("const cmsis_nn_conv_params*",) + _SIZE4,),
    "arm_depthwise_conv_wrapper_s8_get_buffer_size": (
        ("const cmsis_nn_dw_conv_params*",) + _SIZE4,
    ),
    "arm_depthwise_conv_wrapper_s16_get_buffer_size": (
        ("const cmsis_nn_dw_conv_params*",) + _SIZE4,
    ),
    "arm_fully_connected_s8_get_buffer_size": ((_DIMS,),),
    "arm_fully_connected_s16_get_buffer_size": ((_DIMS,),),
    "arm_avgpool_s8_get_buffer_size": (("const int", "const int"),),
    "arm_avgpool_s16_get_buffer_size": (("const int", "const int"),),
}  # fmt: skip


@dataclass(frozen=True)
class ApiFacts:
    """What the tree's API means for TVM's v4.1.0-era calls (the adapter's configuration)."""

    fc_sums: int = 0  # 0: none; 1: row sums (v5.0.0-v6.x); 2: effective bias (v7.0.0+)
    bias_data: bool = False  # arm_convolve_wrapper_s16 takes cmsis_nn_bias_data (v6.0.0+)
    dw_native_mve: bool = False  # one input channel runs as a convolution on MVE (v7.0.0+)
    unknown: Tuple[str, ...] = ()  # entry points whose prototype the adapter does not know


@dataclass(frozen=True)
class CmsisNnTree:
    """A CMSIS-NN tree as read: its ``release`` in words, whether the adapter ``covered`` it
    (else ``why_not``), the header ``revisions`` and the :class:`ApiFacts`."""

    root: Path
    release: str
    covered: bool
    revisions: Optional[Tuple[Version, ...]] = None
    api: ApiFacts = field(default_factory=ApiFacts)
    why_not: Optional[str] = None

    def describe(self) -> str:
        return self.release if self.covered else f"{self.release}, {self.why_not}"


def _signature(text: str, name: str) -> Optional[Tuple[str, ...]]:
    """The parameter types of ``name``'s declaration in (comment-free) ``text``. (The name
    leads the pattern, so the engine skips to it; a prototype has no parentheses among its
    parameters, so an unclosed one scans no further than the next.)"""
    pattern = re.compile(re.escape(name) + r"\s*\(([^;{()]*)\)\s*;")
    match = search_at_word_start(pattern, text)
    if match is None:
        return None
    params = []
    for param in match.group(1).split(","):
        words = " ".join(param.replace("*", " * ").split())
        typed = words.rstrip(_WORD_CHARACTERS)  # without the parameter's name
        words = typed.rstrip() if len(typed) < len(words) else words
        params.append(words.replace(" *", "*"))
    return tuple(params)


def include_dir(root: Path) -> Optional[Path]:
    """The directory holding ``arm_nnfunctions.h`` (CMSIS-NN >= 4, or CMSIS 5's NN)."""
    for candidate in (root / "Include", root / "CMSIS" / "NN" / "Include"):
        if (candidate / HEADERS[0]).is_file():
            return candidate
    return None


def _read_header(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _revision(text: Optional[str]) -> Optional[Version]:
    """The $Revision of a header's ``text`` (None: unreadable, or no such line)."""
    if text is None:
        return None
    match = _REVISION.search(text[:4000])
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _name_release(revisions: Sequence[Version]) -> Tuple[str, bool, Optional[str]]:
    """(the release in words, covered, why not) from the three header revisions."""
    known = list(RELEASES)
    for release in known + list(OLDER):
        if tuple(revisions) == release.revisions:
            if release in OLDER:
                return release.name, False, f"older than {TVM_TARGET_RELEASE}"
            return release.name, True, None

    def at_most(a: Sequence[Version], b: Sequence[Version]) -> bool:
        return all(x <= y for x, y in zip(a, b))

    newest = known[-1]
    text = ", ".join(f"{h} V.{'.'.join(map(str, r))}" for h, r in zip(HEADERS, revisions))
    if at_most(revisions, known[0].revisions):
        return f"older than {known[0].name} ({text})", False, f"older than {TVM_TARGET_RELEASE}"
    for low, high in zip(known, known[1:]):
        if at_most(low.revisions, revisions) and at_most(revisions, high.revisions):
            return f"between {low.name} and {high.name}", True, None
    below = [r for r in known if at_most(r.revisions, revisions)]
    if below:
        after = "newer than" if below[-1] is newest else "after"
        return f"{after} {below[-1].name} ({text})", False, "not verified with this version"
    return f"an unknown mix ({text})", False, "its headers match no release"


def read_api_facts(include: Path) -> ApiFacts:
    """The :class:`ApiFacts` of the headers in ``include``."""
    return _api_facts([_read_header(include / name) for name in HEADERS])


def _api_facts(texts: Sequence[Optional[str]]) -> ApiFacts:
    """The :class:`ApiFacts` of the :data:`HEADERS`' ``texts`` as read (None: unreadable)."""
    functions, types, support = (
        strip_comments(text or "", line_comments=True) for text in texts[:3]
    )
    vector_sum = _signature(functions, "arm_vector_sum_s8")
    fc_sums = 0
    if vector_sum is not None:
        fc_sums = 2 if len(vector_sum) >= 7 else 1  # (…, lhs_offset, rhs_offset, bias): v7.0.0
    unknown: List[str] = []
    for name, known in KNOWN_SIGNATURES.items():
        if _signature(functions, name) not in known:
            unknown.append(name)
    return ApiFacts(
        fc_sums=fc_sums,
        bias_data="cmsis_nn_bias_data" in types
        and _signature(functions, "arm_convolve_wrapper_s16") == KNOWN_SIGNATURES[
            "arm_convolve_wrapper_s16"][1],
        dw_native_mve="CONVERT_DW_CONV_WITH_ONE_INPUT_CH" in support,
        unknown=tuple(unknown),
    )  # fmt: skip


def read_tree(root: Path) -> CmsisNnTree:
    """What the CMSIS-NN tree at ``root`` is (never raises: an unreadable tree is not covered)."""
    include = include_dir(root)
    if include is None:
        return CmsisNnTree(root, "not a CMSIS-NN tree", False, why_not="no arm_nnfunctions.h")
    texts = [_read_header(include / header) for header in HEADERS]
    revisions = [_revision(text) for text in texts]
    api = _api_facts(texts)
    cmsis5 = include.parent.name == "NN" and include.parent.parent.name == "CMSIS"
    if any(r is None for r in revisions):
        missing = ", ".join(h for h, r in zip(HEADERS, revisions) if r is None)
        return CmsisNnTree(
            root, "an unknown CMSIS-NN", False, None, api, f"no $Revision line in {missing}"
        )
    found = tuple(r for r in revisions if r is not None)
    if cmsis5:
        version = ".".join(map(str, found[0]))
        return CmsisNnTree(
            root, f"CMSIS 5's NN (arm_nnfunctions.h V.{version})", False, found, api,
            f"older than {TVM_TARGET_RELEASE}",
        )  # fmt: skip
    release, covered, why_not = _name_release(found)
    if covered and api.unknown:
        covered, why_not = False, "unknown prototypes of " + ", ".join(api.unknown)
    return CmsisNnTree(root, release, covered, found, api, why_not)


def covered_releases() -> List[str]:
    """The releases TVM 0.14's calls run on with their v4.1.0 meaning, for messages."""
    return [release.name for release in RELEASES]
