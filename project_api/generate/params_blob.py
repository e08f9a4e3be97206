"""A params blob the runtime can use where it lies in flash.

TVM's params format packs tensors back to back, so their data sits at arbitrary offsets and
a runtime has to copy it into RAM. We keep the format (any TVM tool still reads the file) but
slip a small padding tensor before each real one, sized so that every real tensor's data
starts on a 64-byte boundary of the blob. The runtime ignores params that are not graph
inputs, so the padding costs a few bytes of flash and no RAM; placed at a 64-byte aligned
address, every parameter is then bound in place.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

import numpy as np

from ..read.dtypes import dtype_from_numpy
from ..read.params import save_params

ALIGN = 64
PAD_PREFIX = "__mlf_pad_"

_LIST_HEADER = 8 + 8  # list magic, reserved
_TENSOR_FIXED = 8 + 8 + 4 + 4 + 4 + 4 + 8  # magic, reserved, device, ndim, dtype, nbytes


def _tensor_header_bytes(ndim: int) -> int:
    return _TENSOR_FIXED + 8 * ndim


def aligned_params(params: Mapping[str, np.ndarray]) -> Tuple[bytes, Dict[str, int]]:
    """Returns the blob and the byte offset of every real tensor's data in it."""
    names = list(params)
    pad_names = [f"{PAD_PREFIX}{i}" for i in range(len(names))]
    clash = set(names) & set(pad_names)
    if clash:
        raise ValueError(f"parameter names collide with padding names: {sorted(clash)}")

    ordered_names: List[str] = []
    for pad, name in zip(pad_names, names):
        ordered_names += [pad, name]
    offset = _LIST_HEADER + 8 + sum(8 + len(n.encode("utf-8")) for n in ordered_names) + 8

    entries: Dict[str, np.ndarray] = {}
    data_offsets: Dict[str, int] = {}
    for pad, name in zip(pad_names, names):
        array = np.asarray(params[name], order="C")  # ascontiguousarray would make 0-d 1-d
        pad_data_start = offset + _tensor_header_bytes(1)
        after_pad_header = pad_data_start + _tensor_header_bytes(array.ndim)
        pad_len = (-after_pad_header) % ALIGN
        entries[pad] = np.zeros((pad_len,), dtype=np.uint8)
        offset = pad_data_start + pad_len
        data_offsets[name] = offset + _tensor_header_bytes(array.ndim)
        entries[name] = array
        offset = data_offsets[name] + _nbytes(array)

    blob = save_params(entries)
    if len(blob) != offset:  # the layout above must be the format's exact layout
        raise AssertionError(f"params layout mismatch: {len(blob)} != {offset}")
    return blob, data_offsets


def _nbytes(array: np.ndarray) -> int:
    dtype = dtype_from_numpy(array.dtype)
    return dtype.itemsize * int(np.prod(array.shape, dtype=np.int64))


def laid_out_params(
    params: Mapping[str, np.ndarray], bindings: Mapping[int, str]
) -> Tuple[bytes, Dict[int, int], int]:
    """The params as plain data for const graph tables, without TVM's headers and names: each
    bound tensor's bytes at the next 64-byte boundary (the alignment TVM's runtime gives
    every tensor, so the model's code may rely on it), in storage-id order. Returns the
    bytes, the offset of each storage id's data, and the padding bytes between them."""
    out = bytearray()
    offsets: Dict[int, int] = {}
    padding = 0
    for sid in sorted(bindings):
        gap = (-len(out)) % ALIGN
        out.extend(bytes(gap))
        padding += gap
        offsets[sid] = len(out)
        out.extend(np.ascontiguousarray(params[bindings[sid]]).tobytes())
    return bytes(out), offsets, padding
