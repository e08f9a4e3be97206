"""The adapter between TVM's CMSIS-NN calls and the CMSIS-NN a firmware links: whether the
tree is covered (else a one-line refusal), and the adapter's plan for a firmware — the calls it
takes over, its compile definitions, and the memory it adds (counted by the fit check and
``footprint``).

The C is ``crt/cmsis_nn/`` (its header lists the changes it bridges). Memory:

- **scratch**: at run time every call asks the linked library (``*_get_buffer_size``) and uses
  TVM's context when it is big enough, else takes that many bytes from the runtime's workspace
  (``TVMBackendAllocWorkspace``, on top of what TVM's code of the operator holds) and gives them
  back before it returns; a workspace too small stops the firmware with the bytes needed, never
  a silent wrong answer. It is planned for each call TVM made, at the CPU level CMSIS-NN is built
  for, as the most any covered release asks for (:func:`scratch_bound` over
  :data:`ANY_COVERED_API`): the same formulas, taken over the releases, because a tree's own
  answers are only known on the target. :func:`workspace_needs` gives it per generated function,
  for the memory planner to add to that operator's workspace window (no static buffer);
- **kernel sums** (fully connected s8 on MVE, v5.0.0+): one int32 per output row and a slot per
  layer, computed at the first call, static (they outlive every run). microTVM firmware (its host
  may rewrite device memory) keeps none and computes them into the workspace at every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import DependencyError
from .calls import ADAPTED_KERNELS, CallSite, CmsisNnCalls
from .release import TVM_TARGET_RELEASE, ApiFacts, CmsisNnTree, covered_releases

PORTABLE, DSP, MVE = 0, 1, 2  # features.LEVELS
CH_IN_BLOCK_MVE = 124  # arm_nnsupportfunctions.h, every release
SLOT_BYTES = {4: 24, 8: 40}  # sizeof(sum_slot) in mlf_cmsis_nn_memory.c by pointer size
WORKSPACE_BLOCK = 64  # the runtime's workspace blocks (MLF_STORAGE_ALIGN)
# Every covered release's API at once (the largest of each fact): what :func:`scratch_bound`
# plans before the tree is known, so that the plan holds for whichever release is linked.
ANY_COVERED_API = ApiFacts(fc_sums=2, bias_data=True, dw_native_mve=True)
MEMORY_SOURCE = "mlf_cmsis_nn_memory.c"
HEADER = "mlf_cmsis_nn.h"
# The release to name, for messages: the fastest exact one (bench part cmsis_nn, KWS: fastest on
# the Cortex-M55, within 0.1 % of v7.0.0 on the M4), and TVM's own target.
RECOMMENDED = "v4.1.0"


def adapter_sources(kernels: Sequence[str]) -> List[str]:
    """The adapter's C files for the called ``kernels`` (``crt/cmsis_nn/``)."""
    return [MEMORY_SOURCE] + [f"mlf_cmsis_nn_{k}.c" for k in ADAPTED_KERNELS if k in kernels]


def _align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def _conv_s8(cols: int, channels: int, kernel_w: int, pad_w: int, level: int) -> int:
    """arm_convolve_wrapper_s8's scratch, the most any covered release asks: im2col of 2
    columns of int16 (DSP/portable; v7 aligns to 4), of 4 columns padded to 16 (MVE; 8 before
    v6) or v6's 1xN padding buffer (MVE)."""
    if level == MVE:
        return max(4 * _align(cols, 16), (kernel_w + pad_w + 1) * channels)
    return 4 * _align(cols, 4)


def scratch_bound(site: CallSite, level: int, api: ApiFacts, keep_sums: bool) -> int:
    """The scratch bytes the call ``site`` may need at CPU ``level`` through the adapter."""
    _, _, _, in_c = site.dim("input")
    _, kernel_h, kernel_w, filter_c = site.dim("filter")
    _, _, _, out_c = site.dim("output")
    pad_w = site.tile("padding")[0]
    kernel = site.kernel
    if kernel == "convolve_wrapper_s8":
        return _conv_s8(in_c * kernel_h * kernel_w, in_c, kernel_w, pad_w, level)
    if kernel == "convolve_wrapper_s16":
        cols = in_c * kernel_h * kernel_w
        return 8 * _align(cols, 8) if level == MVE else 4 * cols
    if kernel == "depthwise_conv_wrapper_s8":
        taps = kernel_h * kernel_w
        batch = site.dim("input")[0]
        pad_h = site.tile("padding")[1]
        # Its buffer serves the channel-for-channel code (arm_depthwise_conv_s8_opt) only;
        # DSP's 3x3 code (padding <= 1) takes none.
        fast = in_c == out_c and batch == 1 and site.tile("dilation") == (1, 1)
        need = 0
        if fast and level == MVE:
            need = 4 * CH_IN_BLOCK_MVE * taps
        elif (
            fast
            and level == DSP
            and not (taps == 9 and kernel_w == 3 and pad_w <= 1 and pad_h <= 1)
        ):
            need = 2 * in_c * taps
        native = level == MVE and api.dw_native_mve
        if in_c == 1 and out_c > 1 and (level in DW_AS_CONV_LEVELS or native):
            # run as a convolution: its im2col buffer, then the transposed filter
            need = max(need, _align(_conv_s8(taps, 1, kernel_w, pad_w, level), 16) + taps * out_c)
        return need
    if kernel == "depthwise_conv_wrapper_s16":
        taps = in_c * kernel_h * kernel_w
        return {MVE: 8 * taps + 8, DSP: 2 * taps}.get(level, 0)
    if kernel == "fully_connected_s8":
        return 4 * filter_c if level == MVE and api.fc_sums and not keep_sums else 0
    if kernel in ("avgpool_s8", "avgpool_s16"):
        return 4 * in_c if level == DSP else 0
    return 0


# Where the adapter runs a one-channel depthwise convolution as a convolution: everywhere it
# is faster, i.e. at every level (KWS with CMSIS-NN v4.1.0, the whole inference: -2.6 % on the
# Cortex-M3's portable C, -6.9 % with DSP on the M4, -37.5 % with MVE on the M55).
DW_AS_CONV_LEVELS = (PORTABLE, DSP, MVE)


@dataclass(frozen=True)
class AdapterPlan:
    """What the adapter is for one firmware."""

    kernels: Tuple[str, ...]  # the adapted kernels the models call
    defines: Tuple[str, ...]  # PRIVATE compile definitions of the library
    scratch_bytes: int  # the most one call takes from the workspace (this tree's API)
    sum_slots: int
    sum_words: int
    pointer_bytes: int = 4

    @property
    def renames(self) -> Tuple[str, ...]:
        """INTERFACE definitions that point the models' calls at the adapter."""
        return tuple(f"arm_{k}=mlf_cmsis_nn_{k}" for k in self.kernels)

    @property
    def sources(self) -> List[str]:
        return adapter_sources(self.kernels)

    @property
    def sums_bytes(self) -> int:
        slot = SLOT_BYTES.get(self.pointer_bytes, 40)
        return 4 * self.sum_words + slot * self.sum_slots

    def ram_items(self) -> Dict[str, int]:
        """The fit check's items for the adapter's static memory: the kept kernel sums (its
        scratch lies in the operators' workspace windows, counted there)."""
        return {"cmsis-nn kernel sums": self.sums_bytes} if self.sum_slots else {}

    def describe(self) -> Dict[str, object]:
        return {
            "kernels": list(self.kernels),
            "scratch_bytes": self.scratch_bytes,
            "kernel_sum_slots": self.sum_slots,
            "kernel_sum_bytes": self.sums_bytes if self.sum_slots else 0,
        }


def plan_adapter(
    calls: Sequence[CmsisNnCalls],
    tree: CmsisNnTree,
    level: int,
    *,
    keep_sums: bool = True,
    pointer_bytes: int = 4,
) -> Optional[AdapterPlan]:
    """The adapter for models whose calls are ``calls`` on ``tree`` built at CPU ``level``; None
    when no model makes a call the adapter takes over."""
    sites = [site for model in calls for site in model.adapted]
    if not sites:
        return None
    api = tree.api
    kernels = tuple(k for k in ADAPTED_KERNELS if any(s.kernel == k for s in sites))
    scratch = 0
    for site in sites:
        need = scratch_bound(site, level, api, keep_sums)
        if need and site.context_bytes < need:
            scratch = max(scratch, need)
    fc_sites = [s for s in sites if s.kernel == "fully_connected_s8"]
    keeps = keep_sums and level == MVE and api.fc_sums > 0 and bool(fc_sites)
    slots = len(fc_sites) if keeps else 0
    words = sum(s.dim("filter")[3] for s in fc_sites) if keeps else 0
    defines = [
        f"MLF_CMSIS_NN_FC_SUMS={api.fc_sums}",
        f"MLF_CMSIS_NN_BIAS_DATA={int(api.bias_data)}",
        f"MLF_CMSIS_NN_DW_AS_CONV={int(level in DW_AS_CONV_LEVELS)}",
        f"MLF_CMSIS_NN_DW_NATIVE_MVE={int(api.dw_native_mve)}",
        f"MLF_CMSIS_NN_SUM_SLOTS={slots}",
        f"MLF_CMSIS_NN_SUM_WORDS={words}",
    ]
    return AdapterPlan(kernels, tuple(defines), scratch, slots, words, pointer_bytes)


def workspace_needs(calls: CmsisNnCalls, level: int, keep_sums: bool) -> Dict[str, int]:
    """{generated function: bytes} the adapter takes from the workspace during that function's
    calls at CPU ``level``, in whole 64-byte blocks: for each call whose context TVM sized too
    small, the most any covered release asks (:data:`ANY_COVERED_API`); per function the
    largest of its calls (each gives its bytes back before it returns)."""
    needs: Dict[str, int] = {}
    for site in calls.adapted:
        need = scratch_bound(site, level, ANY_COVERED_API, keep_sums)
        if need and site.context_bytes < need:
            needs[site.function] = max(needs.get(site.function, 0), _align(need, WORKSPACE_BLOCK))
    return needs


def refuse_uncovered(
    calls: Sequence[Tuple[str, CmsisNnCalls]], tree: CmsisNnTree, where: str
) -> None:
    """Raise a one-line :class:`DependencyError` when a model's calls are TVM's for CMSIS-NN v4
    and ``tree`` (described as ``where``) is not one the adapter covers."""
    if tree.covered:
        return
    users = [(name, c) for name, c in calls if c.api == "v4" and c.sites]
    if not users:
        return
    name, first = users[0]
    names = ", ".join(f"arm_{k}" for k in first.kernels[:4]) + (
        ", …" if len(first.kernels) > 4 else ""
    )
    raise DependencyError(
        f"model {name} calls CMSIS-NN as TVM 0.12-0.18 generated it, for {TVM_TARGET_RELEASE}'s "
        f"API ({names}); the CMSIS-NN of {where} is {tree.describe()}: those calls are not known "
        f"to mean there what TVM meant; use one of {', '.join(covered_releases())} "
        f"({RECOMMENDED} is the fastest)",
        hint="--dependency short_name=cmsis-nn,url=https://github.com/ARM-software/CMSIS-NN.git,"
        f"url_type=git,version_spec={RECOMMENDED}",
    )
