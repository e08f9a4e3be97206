"""Storage planning for graph.json, in the manner of TVM's GraphPlanMemory.

Walking the nodes in order, every operator output takes a storage id that is free at that
moment, preferring the smallest free one at least as large within a factor of 16, else the
largest smaller one within that factor (which then grows); only then a new id. Outputs are
placed before the node's inputs are released, so an operator never writes into storage it
is still reading, unless the operator says its C may overwrite one input (an in-place
depthwise convolution, ADD into an input that dies there: ``Op.inplace_input``) and that
input dies there: then the output takes the input's storage, which grows when the output is
the larger (a 1×1 convolution that widens its input, run from its last pixel to its first:
the output starts at the input's first byte). Inputs and params keep their
own ids for ever, a ``__nop`` output is its input's storage, and the graph's heads are
never handed out again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

MATCH_RANGE = 16


@dataclass(frozen=True)
class PlanNode:
    kind: str  # "null" (input or param), "op" (kernel or __copy), "nop"
    inputs: Sequence[int]  # entry ids read
    outputs: Sequence[int]  # entry ids written
    inplace: Optional[int] = None  # position of an input the first output may overwrite


@dataclass(eq=False)
class _Token:
    sid: int
    size: int
    refs: int = 0
    pinned: bool = False


class _Planner:
    def __init__(self) -> None:
        self.tokens: List[_Token] = []
        self.free: List[_Token] = []

    def new(self, size: int) -> _Token:
        token = _Token(len(self.tokens), size)
        self.tokens.append(token)
        return token

    def request(self, size: int) -> _Token:
        larger = [t for t in self.free if size <= t.size <= size * MATCH_RANGE]
        smaller = [t for t in self.free if size / MATCH_RANGE <= t.size < size]
        token: Optional[_Token] = None
        if larger:
            token = min(larger, key=lambda t: t.size)
        elif smaller:
            token = max(smaller, key=lambda t: t.size)
            token.size = size
        if token is None:
            return self.new(size)
        self.free.remove(token)
        return token

    def release(self, token: _Token) -> None:
        if token.refs <= 0 and not token.pinned and token not in self.free:
            self.free.append(token)


def plan_storage(
    nodes: Sequence[PlanNode], entry_bytes: Sequence[int], heads: Sequence[int]
) -> List[int]:
    """The storage id of every entry (indexed by entry id)."""
    uses = Counter(eid for node in nodes for eid in node.inputs)
    head_set = set(heads)
    planner = _Planner()
    token_of: Dict[int, _Token] = {}
    for node in nodes:
        if node.kind == "null":
            for eid in node.outputs:
                token_of[eid] = planner.new(entry_bytes[eid])
                token_of[eid].pinned = True
        elif node.kind == "nop":
            token = token_of[node.inputs[0]]
            out = node.outputs[0]
            token.refs += uses[out]
            token.pinned = token.pinned or out in head_set
            token_of[out] = token
        else:
            for k, eid in enumerate(node.outputs):
                shared = _in_place(node, k, token_of, entry_bytes[eid], uses)
                reused = shared is not None
                token = shared if shared is not None else planner.request(entry_bytes[eid])
                # a reused token still counts this node's read of the input, released below
                token.refs = uses[eid] + (1 if reused else 0)
                token.pinned = eid in head_set
                token_of[eid] = token
        for eid in node.inputs:
            token_of[eid].refs -= 1
        for eid in [*node.inputs, *node.outputs]:
            planner.release(token_of[eid])
    return [token_of[eid].sid for eid in range(len(entry_bytes))]


def _in_place(
    node: PlanNode, k: int, token_of: Dict[int, _Token], size: int, uses: Counter
) -> Optional[_Token]:
    """The storage of the input ``node`` may overwrite with output ``k``, if that input dies
    here (this node its last reader, read once) and is neither an input nor a param nor a
    head (pinned); it grows to the output's size if that is larger."""
    if k != 0 or node.inplace is None:
        return None
    eid = node.inputs[node.inplace]
    token = token_of[eid]
    if token.refs != 1 or token.pinned or list(node.inputs).count(eid) != 1:
        return None
    token.size = max(token.size, size)
    return token


def storage_sizes(storage_ids: Sequence[int], entry_bytes: Sequence[int]) -> List[int]:
    """Bytes of every storage id: the largest entry placed in it."""
    sizes = [0] * (max(storage_ids, default=-1) + 1)
    for sid, nbytes in zip(storage_ids, entry_bytes):
        sizes[sid] = max(sizes[sid], nbytes)
    return sizes
