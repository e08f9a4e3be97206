"""The inputs a ``run`` feeds a model: from an .npz/.npy, checked against the model's
description, or deterministic random ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..errors import InputError
from ..npfiles import load_arrays


def describe_specs(specs: List[Dict[str, Any]]) -> str:
    return ", ".join(f"{s['name']} {list(s['shape'])} {s['dtype']}" for s in specs)


def holds_inputs_of(path: str, model: Mapping[str, Any]) -> bool:
    try:
        loaded = load_arrays(path, what="input file", error=InputError)
    except InputError:
        return True  # let load_inputs report the problem
    if not isinstance(loaded, dict):
        return len(model["inputs"]) == 1
    return all(spec["name"] in loaded for spec in model["inputs"])


def load_inputs(
    path: Optional[str], model: Mapping[str, Any], *, only_known: bool = False
) -> Dict[str, np.ndarray]:
    """Inputs for ``model`` (project.json's description) from an .npz/.npy, checked against
    its names, shapes and dtypes; deterministic random inputs without a path. With
    ``only_known``, keys naming no input of the model are ignored (a file for several)."""
    from ..generate.samples import input_numpy_dtype, random_inputs

    specs = list(model["inputs"])
    if path is None:

        class _Spec:
            def __init__(self, spec: Mapping[str, Any]) -> None:
                self.name = spec["name"]
                self.shape = tuple(spec["shape"])
                self.dtype = spec["dtype"]

        return random_inputs([_Spec(s) for s in specs], seed=0)
    file = Path(path)
    loaded = load_arrays(file, what="input file", error=InputError)
    if isinstance(loaded, dict):
        given = loaded
    elif len(specs) != 1:
        raise InputError(
            f"{file}: a .npy holds one array, model {model['name']!r} takes "
            f"{len(specs)} inputs ({describe_specs(specs)})",
            hint="give an .npz keyed by input name",
        )
    else:
        given = {specs[0]["name"]: loaded}
    names = [s["name"] for s in specs]
    missing = [n for n in names if n not in given]
    unknown = [] if only_known else [k for k in given if k not in names]
    if missing or unknown:
        problem = (
            f"no input {', '.join(repr(m) for m in missing)}"
            if missing
            else f"unknown input {', '.join(repr(u) for u in unknown)}"
        )
        raise InputError(
            f"{file}: {problem}; model {model['name']!r} takes {describe_specs(specs)}"
        )
    inputs: Dict[str, np.ndarray] = {}
    for spec in specs:
        array = given[spec["name"]]
        want_dtype = input_numpy_dtype(spec["name"], spec["dtype"])
        if tuple(array.shape) != tuple(spec["shape"]) or array.dtype != want_dtype:
            raise InputError(
                f"{file}: input {spec['name']!r} is {array.dtype} {list(array.shape)}; model "
                f"{model['name']!r} takes {describe_specs(specs)}"
            )
        inputs[spec["name"]] = array
    return inputs
