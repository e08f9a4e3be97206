"""Read and validate TVM Model Library Format archives (every version 1-7).

Entry point: :func:`open_archive` returns an :class:`Archive` of validated :class:`Model`
objects. Also the TVM params format (:func:`load_params`, :func:`save_params`), TVM dtypes
(:func:`parse_dtype`, :class:`DType`) and the graph model (:class:`Graph`).
"""

from __future__ import annotations

from .archive import Archive, open_archive
from .dtypes import BFLOAT16, DType, UnknownDTypeError, dtype_from_numpy, parse_dtype
from .extract import ExtractLimits
from .graph import Graph, GraphNode
from .mblob import ArtifactReport, inspect_artifact
from .model import Model, TensorSpec
from .params import load_params, save_params

__all__ = [
    "BFLOAT16",
    "Archive",
    "ArtifactReport",
    "DType",
    "ExtractLimits",
    "Graph",
    "GraphNode",
    "Model",
    "TensorSpec",
    "UnknownDTypeError",
    "dtype_from_numpy",
    "inspect_artifact",
    "load_params",
    "open_archive",
    "parse_dtype",
    "save_params",
]
