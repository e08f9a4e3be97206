"""LiteRT's reference kernels as the tests' oracle for compiled models: run a ``.tflite``'s
bytes through ``BUILTIN_REF``, and the random inputs the tests feed both sides."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Tuple

import numpy as np
import pytest

from project_api.driver import Project

litert = pytest.importorskip(
    "ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert, the test extra) is the oracle"
)


def litert_outputs(model: bytes, inputs: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """Every output of ``model`` for ``inputs`` (by LiteRT's input names), in its order."""
    interpreter = litert.Interpreter(
        model_content=model, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], inputs[detail["name"]])
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def random_inputs(model: bytes, seed: int) -> Dict[str, np.ndarray]:
    """Deterministic inputs by LiteRT's input names: int8 over its whole range, float32 in
    [-2, 2)."""
    interpreter = litert.Interpreter(model_content=model)
    rng = np.random.default_rng(seed)
    inputs = {}
    for detail in interpreter.get_input_details():
        shape = tuple(detail["shape"])
        if detail["dtype"] == np.int8:
            inputs[detail["name"]] = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            inputs[detail["name"]] = rng.uniform(-2, 2, shape).astype(np.float32)
    return inputs


def runs_beside_litert(
    session: Any, model: bytes, seeds: Iterable[int]
) -> Iterator[Tuple[int, Dict[str, np.ndarray], List[np.ndarray]]]:
    """For each seed, ``model``'s random inputs run in ``session`` (a firmware's) and through
    LiteRT: ``(seed, the firmware's outputs by name, LiteRT's outputs in order)``."""
    for seed in seeds:
        inputs = random_inputs(model, seed)
        yield seed, session.run(inputs), litert_outputs(model, inputs)


def assert_runs_as_litert(
    project: Project, model: bytes, seeds: Iterable[int], timeout: float = 60
) -> None:
    """``project``'s built firmware, in one session, on the random inputs of each seed: its
    ``output0`` equal, element for element, to LiteRT's first output of ``model``."""
    with project.session(timeout=timeout) as session:
        for _, got, want in runs_beside_litert(session, model, seeds):
            np.testing.assert_array_equal(got["output0"].reshape(want[0].shape), want[0])
