"""The TVM side of a test, run by ``tests/tvm_host.py`` with the TVM venv's Python:

    python tvm_driver.py SPEC.json RESULT.json

It does what a TVM 0.14 user's script does, through TVM's own Project API client and
``tvm.micro.Session``, and writes what it saw: RESULT.json holds ``steps`` (one dict per step
done, with timings) and ``error`` (None, or the exception's type and message that stopped it);
arrays go to SPEC's ``arrays`` path (.npz). Nothing here imports the project: it only talks to
its Project API server, as TVM would.

SPEC (JSON): ``template_dir``, ``project_dir``, ``options`` (the user's project options),
``tvm_version``; ``steps``: a list, each ``{"do": name, ...}``:

- ``generate`` (``archive``): ``generate_project`` through the template's server, then
  ``build`` and ``flash`` through the generated project's server;
- ``session`` (``actions``): opens ``tvm.micro.Session`` on the project's transport and does
  each action inside it: ``system_lib``; ``graph`` (``archive``, ``inputs``: run with
  ``create_local_graph_executor``, params and graph JSON read from the archive);
  ``operators`` (the same graph run op by op from Python, on tensors made with
  ``tvm.nd.empty(..., device=session.device)``); ``op_time`` (``time_evaluator`` of the first
  operator); ``aot`` (``AotModule(session.create_aot_executor())``, plus ``time_evaluator`` of
  its ``run``); ``copy`` (``nbytes``: one CopyToRemote, timed);
- ``trials`` (``archive``, ``count``, ``action``): AutoTVM's trials, each a new project
  (``generate``) and a session doing ``action``, timed by phase.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tarfile
import time
import traceback
import types
from typing import Any, Dict, List, Optional, Tuple


def import_tvm() -> Any:
    """``tvm`` with just enough of ``tvm.micro`` for a session: its package ``__init__``
    imports the compiler, which a runtime-only build lacks."""
    import tvm

    micro = types.ModuleType("tvm.micro")
    micro.__path__ = [os.path.join(os.path.dirname(tvm.__file__), "micro")]  # type: ignore
    sys.modules["tvm.micro"] = micro
    sys.modules["tvm.micro.project"] = types.ModuleType("tvm.micro.project")
    return tvm


tvm = import_tvm()
import numpy as np  # noqa: E402
from tvm.micro import session as micro_session  # noqa: E402
from tvm.micro import transport as micro_transport  # noqa: E402
from tvm.micro.project_api import client as api_client  # noqa: E402
from tvm.micro.project_api.server import TransportTimeouts  # noqa: E402


class ProjectTransport(micro_transport.Transport):
    """The transport TVM's ``GeneratedProject.transport()`` gives: the Project API client's
    transport calls, with the timeouts ``open_transport`` answered."""

    def __init__(self, client: Any, options: Dict[str, Any]) -> None:
        self._client = client
        self._options = options
        self._timeouts: Optional[TransportTimeouts] = None
        self.reply: Dict[str, Any] = {}

    def timeouts(self) -> TransportTimeouts:
        assert self._timeouts is not None, "the transport is not open"
        return self._timeouts

    def open(self) -> None:
        self.reply = self._client.open_transport(self._options)
        self._timeouts = TransportTimeouts(**self.reply["timeouts"])

    def close(self) -> None:
        if not self._client.is_shutdown:
            self._client.close_transport()
            self._client.shutdown()

    def read(self, n: int, timeout_sec: Optional[float]) -> bytes:
        return self._client.read_transport(n, timeout_sec)["data"]

    def write(self, data: bytes, timeout_sec: Optional[float]) -> None:
        self._client.write_transport(data, timeout_sec)


def with_defaults(options: Dict[str, Any], advertised: List[Dict[str, Any]]) -> Dict[str, Any]:
    """TVM's clients send every advertised option, the defaults of those not chosen."""
    full = {o["name"]: o["default"] for o in advertised}
    full.update(options)
    return full


# --- reading an MLF archive -------------------------------------------------------------------


def read_graph_archive(path: str) -> Tuple[str, bytes]:
    """(graph JSON, params bytes) of the archive's first model, as a user reads them."""
    graph = params = None
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            name = member.name
            source = tar.extractfile(member) if member.isfile() else None
            if source is None:
                continue
            if "/executor-config/graph/" in "/" + name.lstrip("./") and graph is None:
                graph = source.read().decode("utf-8")
            elif name.endswith(".params") and "parameters/" in name and params is None:
                params = source.read()
    if graph is None or params is None:
        raise RuntimeError(f"{path}: no executor-config/graph/*.graph or parameters/*.params")
    return graph, params


# --- actions inside a session -----------------------------------------------------------------


def run_graph(sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    graph_json, params_bytes = read_graph_archive(action["archive"])
    params = tvm.runtime.load_param_dict(params_bytes)
    inputs = dict(np.load(action["inputs"]))
    started = time.monotonic()
    executor = micro_session.create_local_graph_executor(
        graph_json, sess.get_system_lib(), sess.device
    )
    created = time.monotonic()
    if action.get("load_params"):  # as tvmc run does: the params blob, parsed on the host
        executor.load_params(params_bytes)
        executor.set_input(**inputs)
    else:  # as TVM's tutorials do
        executor.set_input(**params)
        for name, value in inputs.items():
            executor.set_input(name, value)
    loaded = time.monotonic()
    executor.run()
    ran = time.monotonic()
    outputs = {}
    for index in range(executor.get_num_outputs()):
        outputs[f"output{index}"] = executor.get_output(index).numpy()
    for key, value in outputs.items():
        arrays[f"{action.get('key', 'graph')}.{key}"] = value
    return {
        "create_s": created - started,
        "load_s": loaded - created,
        "run_s": ran - loaded,
        "outputs": sorted(outputs),
    }


def graph_nodes(graph: Dict[str, Any]) -> List[Tuple[int, Dict[str, Any]]]:
    return list(enumerate(graph["nodes"]))


def run_operators(
    sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]
) -> Dict[str, Any]:
    """The graph's operators called one by one on tensors allocated on the device (no graph
    executor anywhere): what an operator-only module's user does."""
    graph_json, params_bytes = read_graph_archive(action["archive"])
    graph = json.loads(graph_json)
    params = {k: v.numpy() for k, v in tvm.runtime.load_param_dict(params_bytes).items()}
    inputs = dict(np.load(action["inputs"]))
    shapes = graph["attrs"]["shape"][1]
    dtypes = graph["attrs"]["dltype"][1]
    row_ptr = graph["node_row_ptr"]
    lib = sess.get_system_lib()
    entries: Dict[Tuple[int, int], Any] = {}

    def entry_id(node: int, index: int) -> int:
        return int(row_ptr[node]) + index

    def tensor(node: int, index: int) -> Any:
        key = (node, index)
        if key not in entries:
            eid = entry_id(node, index)
            entries[key] = tvm.nd.empty(shapes[eid], dtypes[eid], device=sess.device)
        return entries[key]

    calls = 0
    op_seconds: List[float] = []
    for node_id, node in graph_nodes(graph):
        if node["op"] == "null":
            value = inputs.get(node["name"], params.get(node["name"]))
            if value is None:
                raise RuntimeError(f"graph input {node['name']!r} has no value")
            target = tensor(node_id, 0)
            target.copyfrom(np.ascontiguousarray(value).reshape(target.shape))
            continue
        attrs = node.get("attrs", {})
        func_name = attrs["func_name"]
        args = [tensor(src, index) for src, index, *_ in node["inputs"]]
        outs = [tensor(node_id, i) for i in range(int(attrs.get("num_outputs", 1)))]
        if func_name == "__nop":  # a reshape in place: the same bytes, another shape
            outs[0].copyfrom(args[0].numpy().reshape(outs[0].shape))
            continue
        if int(attrs.get("flatten_data", 0)):
            raise RuntimeError(f"{func_name}: flatten_data is not handled here")
        if action.get("time_ops"):
            # The evaluator's untimed warm-up call computes the output; then one timed call
            # on the same tensors (the device's timer: virtual time under QEMU's -icount).
            evaluator = lib.time_evaluator(func_name, sess.device, number=1, repeat=1)
            op_seconds.append(float(evaluator(*args, *outs).results[0]))
        else:
            lib.get_function(func_name)(*args, *outs)
        calls += 1
    for index, (node, out_index, *_) in enumerate(graph["heads"]):
        arrays[f"{action.get('key', 'operators')}.output{index}"] = tensor(node, out_index).numpy()
    return {"calls": calls, "tensors": len(entries), "op_seconds": op_seconds}


def op_time(sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """``time_evaluator`` of the graph's first operator on device tensors."""
    graph_json, _ = read_graph_archive(action["archive"])
    graph = json.loads(graph_json)
    shapes = graph["attrs"]["shape"][1]
    dtypes = graph["attrs"]["dltype"][1]
    row_ptr = graph["node_row_ptr"]
    operators = [
        (i, n)
        for i, n in graph_nodes(graph)
        if n["op"] != "null" and n["attrs"]["func_name"] != "__nop"
    ]
    if not operators:
        raise RuntimeError("no operator in the graph")
    node_id, node = operators[0]
    eids = [int(row_ptr[src]) + index for src, index, *_ in node["inputs"]]
    eids += [int(row_ptr[node_id]) + i for i in range(int(node["attrs"].get("num_outputs", 1)))]
    args = [tvm.nd.empty(shapes[e], dtypes[e], device=sess.device) for e in eids]
    lib = sess.get_system_lib()
    number, repeat = int(action.get("number", 3)), int(action.get("repeat", 2))
    evaluator = lib.time_evaluator(node["attrs"]["func_name"], sess.device, number, repeat)
    timing = evaluator(*args)
    return {"function": node["attrs"]["func_name"], "results": [float(r) for r in timing.results]}


def run_aot(sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    from tvm.runtime.executor.aot_executor import AotModule

    inputs = dict(np.load(action["inputs"]))
    executor = AotModule(sess.create_aot_executor())
    shapes, dtypes = executor.get_input_info()  # what tvmc run asks first
    for name, value in inputs.items():
        if tuple(shapes[name]) != value.shape or dtypes[name] != str(value.dtype):
            raise RuntimeError(f"input {name}: device says {shapes[name]} {dtypes[name]}")
        executor.get_input(executor.get_input_index(name)).copyfrom(value)
    executor.run()
    for index in range(executor.get_num_outputs()):
        arrays[f"{action.get('key', 'aot')}.output{index}"] = executor.get_output(index).numpy()
    number, repeat = int(action.get("number", 2)), int(action.get("repeat", 2))
    timing = executor.module.time_evaluator("run", sess.device, number, repeat)()
    return {
        "num_inputs": executor.get_num_inputs(),
        "results": [float(r) for r in timing.results],
    }


def op_module(sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """An operator-only module as AutoTVM's runner uses it: random_fill on a device tensor,
    the function by name on tvm.nd.array/empty device tensors, time_evaluator of
    ``__tvm_main__``."""
    rng = np.random.default_rng(28)
    shape, dtype = tuple(action.get("shape", (16,))), action.get("dtype", "float32")
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype)
    dev = sess.device
    lib = sess.get_system_lib()
    ta, tb = tvm.nd.array(a, device=dev), tvm.nd.array(b, device=dev)
    tc = tvm.nd.empty(shape, dtype, device=dev)
    sess._rpc.get_function("tvm.contrib.random.random_fill")(tc)
    dev.sync()
    filled = tc.numpy()
    lib.get_function(action.get("function", "add"))(ta, tb, tc)
    arrays.update({"op.a": a, "op.b": b, "op.c": tc.numpy(), "op.filled": filled})
    timer = lib.time_evaluator("__tvm_main__", dev, number=4, repeat=3, min_repeat_ms=0)
    return {"results": [float(r) for r in timer(ta, tb, tc).results]}


def copy_to_remote(
    sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]
) -> Dict[str, Any]:
    nbytes = int(action.get("nbytes", 65536))
    data = np.arange(nbytes, dtype=np.uint32).astype(np.uint8)
    remote = tvm.nd.empty((nbytes,), "uint8", device=sess.device)
    started = time.monotonic()
    remote.copyfrom(data)
    copied = time.monotonic()
    back = remote.numpy()
    fetched = time.monotonic()
    if not np.array_equal(back, data):
        raise RuntimeError("the copy came back different")
    return {"to_remote_s": copied - started, "from_remote_s": fetched - copied}


def system_lib(sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    started = time.monotonic()
    sess.get_system_lib()
    return {"seconds": time.monotonic() - started}


def device_graph(
    sess: Any, action: Dict[str, Any], arrays: Dict[str, np.ndarray]
) -> Dict[str, Any]:
    """tvm.contrib.graph_executor.create over the session: the graph JSON goes to the device,
    which parses it and runs the graph itself (GraphModule over the remote module)."""
    from tvm.contrib import graph_executor

    graph_json, params_bytes = read_graph_archive(action["archive"])
    params = tvm.runtime.load_param_dict(params_bytes)
    inputs = dict(np.load(action["inputs"]))
    dev = sess.device
    gmod = graph_executor.create(graph_json, sess.get_system_lib(), dev)
    first = next(iter(inputs))
    done: Dict[str, Any] = {
        "num_inputs": gmod.get_num_inputs(),
        "num_outputs": gmod.get_num_outputs(),
        "index_known": gmod.get_input_index(first),
        "index_unknown": gmod.get_input_index("no_such_input"),
    }
    try:  # one packet: fits the receive buffer (sized for the params with the option) or not
        gmod.load_params(params_bytes)
        done["load_params"] = "ok"
    except Exception as err:  # noqa: BLE001 - the device's answer, reported
        done["load_params"] = str(err)[-600:]
        gmod.set_input(**params)  # per tensor: get_input(name).copyfrom
    for name, value in inputs.items():  # set_input by name, then by index (device arrays)
        gmod.module["set_input"](name, tvm.nd.array(value, dev))
        gmod.module["set_input"](gmod.get_input_index(name), tvm.nd.array(value, dev))
        arrays[f"{action.get('key', 'device_graph')}.input.{name}"] = gmod.get_input(name).numpy()
    gmod.run()
    key = action.get("key", "device_graph")
    for index in range(gmod.get_num_outputs()):
        out = gmod.get_output(index)
        arrays[f"{key}.output{index}"] = out.numpy()
        into = tvm.nd.empty(out.shape, out.dtype, device=dev)
        arrays[f"{key}.into{index}"] = gmod.get_output(index, into).numpy()
    timer = gmod.module.time_evaluator("run", dev, number=1, repeat=1)
    done["run_s"] = [float(r) for r in timer().results]
    return done


ACTIONS = {
    "system_lib": system_lib,
    "graph": run_graph,
    "device_graph": device_graph,
    "operators": run_operators,
    "op_time": op_time,
    "aot": run_aot,
    "copy": copy_to_remote,
    "op_module": op_module,
}


# --- steps ------------------------------------------------------------------------------------


def generate(spec: Dict[str, Any], step: Dict[str, Any]) -> Dict[str, Any]:
    started = time.monotonic()
    template = api_client.instantiate_from_dir(spec["template_dir"])
    try:
        info = template.server_info_query(spec.get("tvm_version", "0.14.0"))
        options = with_defaults(spec["options"], info["project_options"])
        template.generate_project(
            model_library_format_path=step["archive"],
            standalone_crt_dir=step.get("standalone_crt_dir", "/nonexistent/standalone_crt"),
            project_dir=spec["project_dir"],
            options=options,
        )
    finally:
        template.shutdown()
    generated = time.monotonic()
    project = api_client.instantiate_from_dir(spec["project_dir"])
    try:
        info = project.server_info_query(spec.get("tvm_version", "0.14.0"))
        options = with_defaults(spec["options"], info["project_options"])
        project.build(options)
        project.flash(options)
    finally:
        project.shutdown()
    return {"generate_s": generated - started, "build_s": time.monotonic() - generated}


def session(
    spec: Dict[str, Any], step: Dict[str, Any], arrays: Dict[str, np.ndarray], done: Dict[str, Any]
) -> None:
    """Fills ``done`` as it goes, so what worked before a failure is still reported."""
    project = api_client.instantiate_from_dir(spec["project_dir"])
    info = project.server_info_query(spec.get("tvm_version", "0.14.0"))
    transport = ProjectTransport(project, with_defaults(spec["options"], info["project_options"]))
    done["actions"] = []
    started = time.monotonic()
    try:
        with micro_session.Session(transport_context_manager=transport) as sess:
            done["start_s"] = time.monotonic() - started
            done["timeouts"] = transport.reply.get("timeouts")
            for action in step.get("actions", []):
                begun = time.monotonic()
                try:
                    result = ACTIONS[action["do"]](sess, action, arrays)
                except Exception as err:  # noqa: BLE001 - one action's failure, reported
                    result = {"error": f"{type(err).__name__}: {err}", "trace": trace()}
                    if "Timeout" in str(err) or "Terminated" in str(err):
                        raise  # the session is gone: nothing after this can work
                # A failed action's frames (kept alive by its traceback's cycle) hold remote
                # handles; freed by a collection in the middle of a later request, each would
                # send its own FreeHandle inside that request's packet (TVM's RPC is not
                # reentrant) and the session would hang. Free them now, between requests.
                gc.collect()
                result.update(do=action["do"], seconds=time.monotonic() - begun)
                done["actions"].append(result)
    finally:
        if not project.is_shutdown:
            project.shutdown()


def trials(
    spec: Dict[str, Any], step: Dict[str, Any], arrays: Dict[str, np.ndarray]
) -> Dict[str, Any]:
    """AutoTVM's trials, each as its builder and runner do one: a new project generated from
    the operator archive, built, flashed, a Session doing ``action``, closed. Seconds per
    phase of each trial."""
    rows = []
    for index in range(int(step.get("count", 1))):
        trial_spec = {**spec, "project_dir": os.path.join(spec["project_dir"], f"trial{index}")}
        row = generate(trial_spec, step)
        done: Dict[str, Any] = {}
        began = time.monotonic()
        session(trial_spec, {"actions": [step["action"]]}, arrays, done)
        if "error" in done["actions"][0]:
            raise RuntimeError(f"trial {index}: {done['actions'][0]['error']}")
        row["session_s"] = time.monotonic() - began
        row["total_s"] = row["generate_s"] + row["build_s"] + row["session_s"]
        rows.append(row)
    return {"trials": rows}


def trace() -> str:
    return traceback.format_exc()[-4000:]


def main(argv: List[str]) -> int:
    spec_path, result_path = argv[1], argv[2]
    with open(spec_path) as stream:
        spec = json.load(stream)
    arrays: Dict[str, np.ndarray] = {}
    result: Dict[str, Any] = {"steps": [], "error": None}
    try:
        for step in spec["steps"]:
            began = time.monotonic()
            done: Dict[str, Any] = {"do": step["do"], "ok": False}
            result["steps"].append(done)
            if step["do"] == "generate":
                done.update(generate(spec, step))
            elif step["do"] == "session":
                session(spec, step, arrays, done)
            elif step["do"] == "trials":
                done.update(trials(spec, step, arrays))
            else:
                raise ValueError(f"unknown step {step['do']!r}")
            done.update(ok=True, seconds=time.monotonic() - began)
    except Exception as err:  # noqa: BLE001 - reported to the test, which decides
        result["error"] = {
            "type": type(err).__name__,
            "message": str(err),
            "traceback": traceback.format_exc(),
        }
    if arrays:
        np.savez(spec["arrays"], **arrays)
    with open(result_path, "w") as stream:
        json.dump(result, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
