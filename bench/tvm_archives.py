"""Make TVM 0.14 Model Library Format archives of ``.tflite`` models, as ``../shared/mlf`` holds.

Runs under TVM's own Python (``../shared/tools/build_tvm.sh DEST``, then ``source
DEST/env.sh``); it imports nothing of this project::

    python bench/tvm_archives.py OUTDIR [MODEL.tflite ...]   # default: ../shared/models/*.tflite

For each model ``STEM.tflite`` it writes, into ``OUTDIR``, what ``../shared/mlf/README.md``
describes for the corpus's graph archives:

- ``STEM.tar``: ``relay.build`` with target ``c -keys=cpu -model=host``,
  ``Runtime("crt", {"system-lib": True})``, ``Executor("graph")``, ``opt_level=3``,
  ``tir.disable_vectorize``, exported untouched by ``tvm.micro.export_model_library_format``
  (the model inside is named after the stem, lower case, ``_`` for anything not a C name);
- ``STEM.inputs.npz``: random inputs (seed 0) keyed by the graph's input names: int8/uint8
  over their whole range, float32 uniform in [-2, 2) (``--float-scale`` multiplies them), or
  those ``--inputs`` gives;
- ``STEM.outputs.npz``: what TVM's C++ graph executor produces for them (``output0..N-1``),
  running the same generated C built as a host shared library;
- ``STEM.json``: how it was built (the corpus's keys: ``model_name``, ``inputs``, ``outputs``
  as ``[shape, dtype]``, ``cmsis_nn``, ``link_params``, ``members``).

Part 24 (``bench/compiled.py``) measures these archives beside ``compile``'s own when
``MLF_BENCH_TVM_ARCHIVES=OUTDIR``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

SHARED_MODELS = Path(__file__).resolve().parent.parent.parent / "shared" / "models"
TARGET = "c -keys=cpu -model=host"
# TFLite's TensorType codes this script feeds (tflite/TensorType.py)
TFLITE_TYPES = {0: "float32", 2: "int32", 3: "uint8", 9: "int8"}


def model_name(stem: str) -> str:
    """The name TVM gives the model inside the archive (``tvmgen_<name>_...``)."""
    name = re.sub(r"[^0-9a-z_]", "_", stem.lower())
    return name if not name[:1].isdigit() else f"m_{name}"


def graph_inputs(tflite_model: Any) -> List[Tuple[str, Tuple[int, ...], str]]:
    """(name, shape, dtype) of the first subgraph's inputs."""
    graph = tflite_model.Subgraphs(0)
    found = []
    for index in range(graph.InputsLength()):
        tensor = graph.Tensors(graph.Inputs(index))
        found.append(
            (
                tensor.Name().decode(),
                tuple(int(d) for d in tensor.ShapeAsNumpy()),
                TFLITE_TYPES[tensor.Type()],
            )
        )
    return found


def random_inputs(
    specs: List[Tuple[str, Tuple[int, ...], str]], seed: int, float_scale: float
) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, shape, dtype in specs:
        if dtype in ("int8", "uint8"):
            info = np.iinfo(dtype)
            inputs[name] = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        else:
            inputs[name] = (rng.uniform(-2, 2, shape) * float_scale).astype(dtype)
    return inputs


def build(tvm: Any, relay: Any, mod: Any, params: Any, name: str, runtime: Any) -> Any:
    from tvm.relay.backend import Executor

    config = {"tir.disable_vectorize": True}
    with tvm.transform.PassContext(opt_level=3, config=config):
        return relay.build(
            mod,
            target=tvm.target.Target(TARGET),
            runtime=runtime,
            executor=Executor("graph"),
            params=params,
            mod_name=name,
        )


def reference(tvm: Any, factory: Any, inputs: Dict[str, np.ndarray], work: Path) -> List[Any]:
    """The outputs of TVM's C++ graph executor, the factory's C built as a host library."""
    from tvm.contrib import graph_executor

    library = work / "model.so"
    factory.export_library(str(library))
    loaded = tvm.runtime.load_module(str(library))
    executor = graph_executor.GraphModule(loaded[factory.libmod_name](tvm.cpu()))
    for key, value in inputs.items():
        executor.set_input(key, value)
    executor.run()
    return [executor.get_output(i).numpy() for i in range(executor.get_num_outputs())]


def make(path: Path, out: Path, seed: int, float_scale: float, name: str = "",
         given: Optional[Path] = None) -> Path:  # fmt: skip
    import tflite
    import tvm
    import tvm.micro
    from tvm import relay
    from tvm.relay.backend import Runtime

    tflite_model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    specs = graph_inputs(tflite_model)
    mod, params = relay.frontend.from_tflite(
        tflite_model,
        shape_dict={name: shape for name, shape, _ in specs},
        dtype_dict={name: dtype for name, _, dtype in specs},
    )
    name = name or model_name(path.stem)
    archive = out / f"{path.stem}.tar"
    factory = build(tvm, relay, mod, params, name, Runtime("crt", {"system-lib": True}))
    tvm.micro.export_model_library_format(factory, str(archive))

    inputs = dict(np.load(given)) if given else random_inputs(specs, seed, float_scale)
    # the same C, built for TVM's C++ runtime (the crt system-lib registry is for the device)
    host = build(tvm, relay, mod, params, name, Runtime("cpp"))
    with tempfile.TemporaryDirectory() as work:
        outputs = reference(tvm, host, inputs, Path(work))
    np.savez(out / f"{path.stem}.inputs.npz", **inputs)
    np.savez(out / f"{path.stem}.outputs.npz", **{f"output{i}": v for i, v in enumerate(outputs)})
    with tarfile.open(archive) as tar:
        members = sorted(m.name for m in tar.getmembers() if m.isfile())
    described = {
        "tvm_version": tvm.__version__,
        "model_name": name,
        "source": path.name,
        "cmsis_nn": False,
        "link_params": False,
        "executor": "graph",
        "runtime": "crt system-lib",
        "target": TARGET,
        "inputs": {n: [list(s), d] for n, s, d in specs},
        "outputs": {f"output{i}": [list(v.shape), str(v.dtype)] for i, v in enumerate(outputs)},
        "input_seed": None if given else seed,
        "reference": "TVM C++ graph executor, same C code built as a host shared library",
        "members": members,
    }
    (out / f"{path.stem}.json").write_text(json.dumps(described, indent=1) + "\n")
    return archive


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="directory for STEM.tar and its references")
    parser.add_argument("models", nargs="*", type=Path, help="default: ../shared/models/*.tflite")
    parser.add_argument("--seed", type=int, default=0, help="of the random inputs (default 0)")
    parser.add_argument("--float-scale", type=float, default=1.0, help="float inputs × this")
    parser.add_argument("--name", default="", help="the model's name in the archive (one model)")
    parser.add_argument("--inputs", type=Path, help="an .npz of inputs instead (one model)")
    args = parser.parse_args(argv)
    models = args.models or sorted(SHARED_MODELS.glob("*.tflite"))
    if not models:
        print(f"tvm_archives: no .tflite given and none in {SHARED_MODELS}", file=sys.stderr)
        return 2
    if (args.name or args.inputs) and len(models) != 1:
        print("tvm_archives: --name and --inputs take one model", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for path in models:
        made = make(path, args.out, args.seed, args.float_scale, args.name, args.inputs)
        print(f"{path.name} -> {made}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
