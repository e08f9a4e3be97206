"""Which CPU features TVM assumed when it generated CMSIS-NN calls, and how CMSIS-NN must be
built to match them.

TVM's CMSIS-NN backend sizes each kernel's scratch buffer (the ``cmsis_nn_context`` it
passes) for the CPU its *target* names: ``-mcpu`` and ``-mattr`` of the model's targets, read
by TVM's M-profile target parser. Cores with the DSP extension: cortex-m4, m7, m33, m35p,
m55, m85; with MVE as well: m55, m85 (a prefix match, as TVM does); ``+nodsp`` / ``+nomve``
in ``-mcpu`` or ``-mattr`` take them away (no DSP means no MVE). A target without ``-mcpu``
(``c -keys=cpu -model=host``, what the corpus archives use) assumes neither, and TVM then
passes ``{NULL, 0}`` contexts to kernels whose DSP code needs scratch memory.

CMSIS-NN chooses its DSP and MVE code at compile time from ``__ARM_FEATURE_DSP`` /
``__ARM_FEATURE_MVE`` (``arm_nn_math_types.h`` turns them into ``ARM_MATH_DSP`` /
``ARM_MATH_MVEI``; CMSIS 5's ``arm_math_types.h`` does the same). Compiled with the board's
``-mcpu=cortex-m4`` it takes the DSP paths, finds no buffer, returns an error that TVM's
generated code ignores, and the model silently predicts garbage. So the library is built at
the *feature level* TVM assumed, by undefining the macros the board's compiler predefines.

The portable C paths need no more scratch than any other level, so whenever the assumed
level cannot be honoured exactly (models that disagree, a board lacking what was assumed)
CMSIS-NN is built portable.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

# TVM 0.14 src/target/parsers/mprofile.cc (facts, not code).
_DSP_CPUS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85")
_MVE_CPUS = ("cortex-m55", "cortex-m85")

LEVELS = ("portable", "dsp", "mve")
_UNDEFINE = {
    "dsp": "-U__ARM_FEATURE_DSP",
    "mve": "-U__ARM_FEATURE_MVE",
}


@dataclass(frozen=True)
class CpuFeatures:
    """DSP/MVE as one level: 0 portable (neither), 1 DSP, 2 DSP + MVE.

    ``mcpu``/``mattr`` are what the deciding target string said (None/empty when it named no
    CPU); ``target`` is that string (for messages).
    """

    level: int
    mcpu: Optional[str] = None
    mattr: Tuple[str, ...] = ()
    target: str = ""

    @property
    def dsp(self) -> bool:
        return self.level >= 1

    @property
    def mve(self) -> bool:
        return self.level >= 2

    @property
    def name(self) -> str:
        return LEVELS[self.level]

    def describe(self) -> str:
        if self.mcpu is None:
            return f"target {self.target!r} names no -mcpu: no DSP, no MVE"
        attrs = f" -mattr={','.join(self.mattr)}" if self.mattr else ""
        has = {0: "no DSP, no MVE", 1: "DSP, no MVE", 2: "DSP and MVE"}[self.level]
        return f"target {self.target!r} (-mcpu={self.mcpu}{attrs}): {has}"


def _split(target: str) -> List[str]:
    try:
        return shlex.split(target)
    except ValueError:
        return target.split()


def _option(words: Sequence[str], name: str) -> Optional[str]:
    """The value of ``-name=value`` / ``--name=value`` / ``-name value`` in a target string."""
    for index, word in enumerate(words):
        match = re.match(rf"^--?{name}(?:=(.*))?$", word)
        if match:
            if match.group(1) is not None:
                return match.group(1)
            if index + 1 < len(words) and not words[index + 1].startswith("-"):
                return words[index + 1]
            return ""
    return None


def parse_target(target: str) -> CpuFeatures:
    """The DSP/MVE level TVM's M-profile parser gives one target string."""
    words = _split(str(target))
    mcpu = _option(words, "mcpu")
    mattr_text = _option(words, "mattr") or ""
    mattr = tuple(a.strip() for a in mattr_text.split(",") if a.strip())
    if not mcpu:
        return CpuFeatures(0, None, mattr, str(target).strip())
    lowered = mcpu.lower()
    flags = [lowered] + [a.lower() for a in mattr]
    nodsp = any("+nodsp" in f for f in flags)
    nomve = any("+nomve" in f for f in flags)
    level = 0
    if lowered.startswith(_MVE_CPUS) and not (nodsp or nomve):
        level = 2
    elif lowered.startswith(_DSP_CPUS) and not nodsp:
        level = 1
    return CpuFeatures(level, mcpu, mattr, str(target).strip())


def assumed_features(targets: Union[Sequence[Any], Mapping[str, Any]]) -> CpuFeatures:
    """What a model's code was generated for: the ``cmsis-nn`` target's CPU if it names one,
    else the first target that names a ``-mcpu``, else no DSP/MVE (TVM's default).

    ``targets`` is ``Model.targets`` (strings; a v5 ``{"1": "c ..."}`` dict's values work).
    """
    values = list(targets.values()) if isinstance(targets, Mapping) else list(targets)
    parsed = [parse_target(str(t)) for t in values if str(t).strip()]
    cmsis = [p for p in parsed if p.target.split(" ", 1)[0] in ("cmsis-nn", "cmsisnn")]
    for candidate in cmsis + parsed:
        if candidate.mcpu:
            return candidate
    first = parsed[0].target if parsed else ""
    return CpuFeatures(0, None, (), first)


def board_level(cpu: Any) -> int:
    """The DSP/MVE level of a board's CPU (``Board.cpu``: ``dsp``/``mve`` flags; None = host)."""
    if cpu is None:
        return 0
    mve = bool(getattr(cpu, "mve", False) if not isinstance(cpu, dict) else cpu.get("mve"))
    dsp = bool(getattr(cpu, "dsp", False) if not isinstance(cpu, dict) else cpu.get("dsp"))
    return 2 if mve else 1 if dsp else 0


@dataclass(frozen=True)
class CmsisNnBuild:
    """How CMSIS-NN is compiled for a firmware: ``level`` and the flags that force it."""

    level: int
    flags: Tuple[str, ...]
    reason: Optional[str]  # a sentence when the board's own level is not used, or is with scratch
    # The calls TVM made go through the adapter (crt/cmsis_nn/), which hands kernels the
    # scratch memory TVM did not size.
    scratch: bool = False

    @property
    def name(self) -> str:
        return LEVELS[self.level]


def level_pins(level: int) -> Tuple[str, ...]:
    """The ``-U`` flags that hold CMSIS-NN at ``level`` on any core above it (an export
    compiled by a firmware for a larger CPU builds the kernels it was planned for)."""
    return tuple(_UNDEFINE[name] for name in LEVELS[level + 1 :])


def cmsis_nn_build(
    assumed: Sequence[Tuple[str, CpuFeatures]],
    cpu: Any,
    board_name: str = "the board",
    *,
    scratch_shim: bool = False,
) -> CmsisNnBuild:
    """The CMSIS-NN feature level for models generated as ``assumed`` ((model, features)
    pairs) on a board whose CPU is ``cpu``; flags are ``-U`` options for the board's compiler.

    The board's level is kept when every model assumed exactly it; a lower level all models
    agree on and the board has is built by undefining what lies above it; anything else
    (models that disagree, a board without what was assumed) falls back to the portable C,
    which needs the least scratch memory of all.

    With ``scratch_shim`` (the generator links the adapter, ``crt/cmsis_nn/``) the board's own
    level is always built: the adapter gives the kernels the scratch memory TVM did not size.
    """
    have = board_level(cpu)
    if not assumed:
        return CmsisNnBuild(have, (), None)
    levels = {features.level for _, features in assumed}
    if scratch_shim and have > min(levels):
        why = "; ".join(f"model {name}: {features.describe()}" for name, features in assumed)
        reason = (
            f"CMSIS-NN is compiled for {board_name}'s {_FEATURES[have]} although {why}: the "
            "calls TVM generated get their scratch memory from the adapter (crt/cmsis_nn) "
            "where its contexts are empty"
        )
        return CmsisNnBuild(have, (), reason, scratch=True)
    agreed = min(levels)
    level = agreed if len(levels) == 1 and agreed <= have else 0
    if level == have:
        return CmsisNnBuild(level, (), None)
    flags = tuple(_UNDEFINE[name] for name in LEVELS[level + 1 : have + 1])
    why = "; ".join(f"model {name}: {features.describe()}" for name, features in assumed)
    if len(levels) > 1:
        cause = "the models were generated for different CPU features"
    elif agreed > have:
        cause = f"{board_name} lacks what TVM assumed, so only the portable code fits its buffers"
    else:
        cause = (
            f"TVM sized CMSIS-NN's scratch buffers for that ({{NULL, 0}} contexts where its "
            f"code needs none); the library's {_FEATURES[have]} code would need more and fail "
            "silently"
        )
    reason = (
        f"CMSIS-NN is compiled for {_SPOKEN[level]} ({' '.join(flags)}) although {board_name} "
        f"has {_FEATURES[have]}: {why}; {cause}"
    )
    return CmsisNnBuild(level, flags, reason)


_SPOKEN = ("a core without DSP/MVE", "a core with DSP, without MVE", "a core with DSP and MVE")
_FEATURES = ("neither DSP nor MVE", "DSP", "DSP and MVE")
