"""Named factory models for tests, benchmarks and the demo.

``catalog()`` maps a name to a function returning a fresh GeneratedModel. Weights are
seeded random numbers (except ``digits``), so every call yields the same archive bytes.
"""

from __future__ import annotations

import functools
import tarfile
from typing import Callable, Dict

import numpy as np

from . import digits
from .model import GeneratedModel
from .network import Network, Value
from .ops import quantize_multiplier

Factory = Callable[[], GeneratedModel]


def _weights(seed: int) -> Callable[..., np.ndarray]:
    """A weight maker: ``w(shape, fan_in)`` ~ N(0, 1/fan_in), float32."""
    rng = np.random.default_rng(seed)

    def make(shape: tuple, fan_in: int = 0) -> np.ndarray:
        scale = 1.0 / np.sqrt(fan_in) if fan_in else 0.5
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return make


def mlp(name: str = "mlp", version: int = 7) -> GeneratedModel:
    """Float MLP: dense+bias+relu (one fused function), dense+bias, softmax."""
    w = _weights(1)
    net = Network(name)
    x = net.input("x", (1, 16))
    hidden = net.dense(x, w((32, 16), 16), w((32,)), relu=True)
    net.output(net.softmax(net.dense(hidden, w((10, 32), 32), w((10,)))))
    return net.build(default_version=version, description="float MLP 16-32-10 with softmax")


def cnn_nchw() -> GeneratedModel:
    """Float NCHW CNN; both padded convolutions take their pad_temp from the workspace."""
    w = _weights(2)
    net = Network("cnn_nchw")
    x = net.input("data", (1, 1, 16, 16))
    y = net.conv2d(x, w((4, 1, 3, 3), 9), w((4,)), padding=1, relu=True)
    y = net.max_pool2d(y, 2)
    y = net.conv2d(y, w((8, 4, 3, 3), 36), w((8,)), strides=2, padding=1, relu=True)
    y = net.avg_pool2d(y, 2)
    y = net.reshape(y, (1, 32))
    net.output(net.softmax(net.dense(y, w((10, 32), 32), w((10,)))))
    return net.build(description="float CNN, NCHW: conv-pool-conv-pool-dense-softmax")


def cnn_nhwc() -> GeneratedModel:
    """Float NHWC CNN (HWIO weights), standalone relu, max and avg pooling."""
    w = _weights(3)
    net = Network("cnn_nhwc")
    x = net.input("input_1", (1, 12, 12, 3))
    y = net.conv2d(x, w((3, 3, 3, 8), 27), w((8,)), layout="NHWC", relu=True)
    y = net.max_pool2d(y, 2, layout="NHWC")
    y = net.conv2d(y, w((3, 3, 8, 8), 72), w((8,)), strides=2, padding=1, layout="NHWC")
    y = net.relu(y)
    y = net.avg_pool2d(y, 3, layout="NHWC")
    y = net.reshape(y, (1, 8))
    net.output(net.dense(y, w((4, 8), 8), w((4,))))
    return net.build(description="float CNN, NHWC")


def _int8(rng: np.random.Generator, shape: tuple, low: int = -127, high: int = 127) -> np.ndarray:
    return rng.integers(low, high, shape, endpoint=True).astype(np.int8)


def _requant_for(accumulator_std: float, target_std: float = 40.0) -> tuple:
    return quantize_multiplier(min(0.99, target_std / max(accumulator_std, 1.0)))


def cnn_int8() -> GeneratedModel:
    """int8 NHWC CNN: per-channel and per-tensor requantization, int8 max pool, int8 dense.

    The first convolution takes two workspace buffers (widened padded input, accumulators),
    freed in LIFO order.
    """
    rng = np.random.default_rng(4)
    net = Network("cnn_int8")
    x = net.input("input", (1, 16, 16, 4), "int8")
    w1, b1 = _int8(rng, (3, 3, 4, 8), -64, 64), rng.integers(-500, 500, 8).astype(np.int32)
    scales = np.array([_requant_for(s) for s in np.linspace(1500, 4000, 8)])
    y = net.qconv2d(x, w1, b1, multiplier=scales[:, 0].astype(np.int32),
                    shift=scales[:, 1].astype(np.int32), padding=1, input_zero_point=-3,
                    output_zero_point=-128, relu=True)  # fmt: skip
    y = net.max_pool2d(y, 2, layout="NHWC")
    mult, shift = _requant_for(2500)
    w2, b2 = _int8(rng, (3, 3, 8, 8), -32, 32), rng.integers(-2000, 2000, 8).astype(np.int32)
    y = net.qconv2d(y, w2, b2, multiplier=mult, shift=shift, strides=2, padding=1,
                    input_zero_point=-128, output_zero_point=5)  # fmt: skip
    y = net.reshape(y, (1, 128))
    mult, shift = _requant_for(3000)
    w3, b3 = _int8(rng, (10, 128), -40, 40), rng.integers(-1000, 1000, 10).astype(np.int32)
    net.output(net.qdense(y, w3, b3, multiplier=mult, shift=shift, input_zero_point=5,
                          output_zero_point=-10))  # fmt: skip
    return net.build(description="int8 CNN with requantization, exact integer reference")


def ops_zoo() -> GeneratedModel:
    """The remaining operators: broadcast add of two inputs, bias_add, broadcast and
    scalar-constant arithmetic, relu, ``__copy``, avg pool (NCHW), a fused element-wise
    chain, and an output that is a ``__nop`` view."""
    w = _weights(5)
    net = Network("ops_zoo")
    x = net.input("x", (1, 4, 6, 6))
    z = net.input("z", (4, 1, 1))
    y = net.add(x, z)
    y = net.bias_add(y, w((4,)))
    y = net.subtract(y, w((6,)))
    y = net.multiply(y, np.float32(1.5))
    y = net.copy(net.relu(y))
    pooled = net.avg_pool2d(y, 2)
    chain = [("subtract", 0.25), ("tanh", 0), ("multiply", 2.0), ("sigmoid", 0), ("exp", 0)]
    squashed = net.elementwise(pooled, chain)
    net.output(net.reshape(squashed, (1, 36)), y)
    return net.build(description="coverage of the element-wise and layout operators")


LONG_INPUT_NAME = (
    "serving_default_input_tensor_of_a_converted_model_whose_name_is_far_longer_than_eighty_chars"
)


def long_names() -> GeneratedModel:
    """Function names over 120 characters (TVM's 80-character cut plus hash) and an input
    name over 80 characters."""
    w = _weights(6)
    net = Network("model_with_a_rather_long_module_name_x")
    x = net.input(LONG_INPUT_NAME, (1, 8))
    steps = [(op, 0.1 * (i + 1)) for i, op in enumerate(["add", "multiply", "subtract"] * 5)]
    y = net.elementwise(x, steps + [("tanh", 0.0)])
    net.output(net.dense(y, w((4, 8), 8), w((4,)), relu=True))
    return net.build(description="names longer than TVM's runtime limits")


def many_args() -> GeneratedModel:
    """One operator with 12 arguments (11 inputs + output; TVM's CRT allows at most 9)."""
    w = _weights(7)
    net = Network("many_args")
    x = net.input("x", (1, 8))
    total = net.add_n([x] + [w((1, 8)) for _ in range(10)])
    net.output(net.relu(total))
    return net.build(description="an operator with more than 9 arguments")


def multi_output() -> GeneratedModel:
    """A split with 4 outputs; model outputs are its entries 0 and 3, a relu of entry 1,
    and (as in TVM's own multi-output archive) a ``__nop`` reshape of the input itself."""
    net = Network("multi_output")
    x = net.input("x", (1, 8, 4, 4))
    parts = net.split(x, 4, axis=1)
    net.output(parts[0], net.relu(parts[1]), parts[3], net.reshape(x, (1, 128)))
    return net.build(description="an operator with num_outputs > 1")


def scalar() -> GeneratedModel:
    """Scalar ``[]`` shapes: a scalar input, a scalar param, scalar outputs."""
    net = Network("scalar")
    x = net.input("x", (8,))
    s = net.input("scale", ())
    total = net.sum(net.multiply(x, s))
    net.output(total, net.add(total, np.float32(0.5)))
    return net.build(description="scalar input, param and outputs")


def failing_inputs(seed: int = 0, fail: bool = False) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, 4)).astype(np.float32)
    return {"x": x, "fail": np.array(1 if fail else 0, dtype=np.int32)}


def failing() -> GeneratedModel:
    """Its second operator returns -1 when the int32 scalar input ``fail`` is non-zero."""
    net = Network("failing")
    x = net.input("x", (1, 4))
    flag = net.input("fail", (), "int32")
    y = net.fail_if(net.relu(x), flag)
    net.output(net.add(y, np.float32(1.0)))
    return net.build(sample_fn=failing_inputs, description="operator failure on demand")


def many_functions(count: int = 40) -> GeneratedModel:
    """``count`` distinct functions, so the operators spill into lib2.c."""
    net = Network("many_functions")
    y: Value = net.input("x", (1, 16))
    for i in range(count):
        y = net.elementwise(y, [("add", 0.01 * (i + 1))])
    net.output(y)
    return net.build(description=f"{count} distinct operator functions in several files")


def multi_model() -> GeneratedModel:
    """Two models in one v7 archive (both define TVMSystemLibEntryPoint, as TVM's do)."""
    return mlp().with_companions(cnn_nchw())


def cnn_pair() -> GeneratedModel:
    """Two float CNNs of similar size in one v7 archive (NCHW 6.3 KiB and NHWC 5.6 KiB of
    planned arena): a firmware of both shares one arena."""
    return cnn_nchw().with_companions(cnn_nhwc())


def chain_add(n: int) -> GeneratedModel:
    """x [1, 256] float32 added ``n`` times: one shared function, n graph operators, the
    intermediates ping-ponging between two storage ids (~3-4 KiB of tensors for any n)."""
    if n < 1:
        raise ValueError("chain_add needs n >= 1")
    net = Network(f"chain_add_{n}")
    x = net.input("x", (1, 256))
    y = x
    for _ in range(n):
        y = net.add(y, x)
    net.output(y)
    return net.build(description=f"chain of {n} element-wise adds (runtime RAM benchmark)")


def params_sized(nbytes: int) -> GeneratedModel:
    """An MLP 64 → H → 8 whose params total about ``nbytes`` (H chosen to fit)."""
    if nbytes < 1024:
        raise ValueError("params_sized needs at least 1024 bytes")
    hidden = max(1, round((nbytes / 4 - 8) / 73))
    w = _weights(8)
    net = Network(f"params_{nbytes}")
    x = net.input("x", (1, 64))
    y = net.dense(x, w((hidden, 64), 64), w((hidden,)), relu=True)
    net.output(net.dense(y, w((8, hidden), hidden), w((8,))))
    return net.build(description=f"params of about {nbytes} bytes (build-time benchmark)")


def digits_example() -> GeneratedModel:
    """The bundled digits classifier, with the weights shipped in examples/ when present."""
    from ..read.params import load_params
    from ..resources import examples_dir

    try:
        archive = examples_dir() / "digits.tar"
    except FileNotFoundError:
        archive = None
    if archive is None or not archive.is_file():
        return digits.digits_model()
    with tarfile.open(archive) as tar:
        member = tar.extractfile("./parameters/digits.params")
        assert member is not None
        params = load_params(member.read())
    weights = dict(zip(("w1", "b1", "w2", "b2"), params.values()))
    return digits.digits_network(weights).build(
        sample_fn=digits.digit_sample, description="bundled 8x8 digit classifier"
    )


def catalog() -> Dict[str, Factory]:
    """Every named model: name -> factory returning a GeneratedModel."""
    return {
        "mlp": mlp,
        "cnn_nchw": cnn_nchw,
        "cnn_nhwc": cnn_nhwc,
        "cnn_int8": cnn_int8,
        "ops_zoo": ops_zoo,
        "long_names": long_names,
        "many_args": many_args,
        "multi_output": multi_output,
        "scalar": scalar,
        "failing": failing,
        "many_functions": many_functions,
        "multi_model": multi_model,
        "cnn_pair": cnn_pair,
        "mlp_v5": functools.partial(mlp, "mlp_v5", 5),
        "mlp_v6": functools.partial(mlp, "mlp_v6", 6),
        "chain_add_10": functools.partial(chain_add, 10),
        "chain_add_100": functools.partial(chain_add, 100),
        "chain_add_400": functools.partial(chain_add, 400),
        "params_1k": functools.partial(params_sized, 1024),
        "params_64k": functools.partial(params_sized, 64 * 1024),
        "digits": digits_example,
    }
