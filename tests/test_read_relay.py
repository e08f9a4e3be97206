"""Output shapes of AOT models from the Relay text where TVM wrote no result type: followed
back from the result expression, taken only when exact, flat otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import corpus_archive, corpus_case

from project_api.read import open_archive
from project_api.read.relay import main_signature, result_shapes

SIGNATURE = (
    "def @main(%x: Tensor[(1, 49, 10, 1), int8] /* span=x:0:0 */, %w: Tensor[(12, 64), int8]"
)


def relay(*lines: str, params: str = "") -> str:
    body = "\n".join(f"  {line}" for line in lines)
    return f'{SIGNATURE}{params}, output_tensor_names=["Identity"]) {{\n{body}\n}}\n'


KWS_TAIL = (
    "%39 = nn.avg_pool2d(%38, pool_size=[25, 5]) /* span=a:0:0 */;",
    "%40 = reshape(%39, newshape=[-1, 64]) /* span=b;c:0:0 */;",
    '%41 = qnn.dense(%40, %w, -128, 0, 0.08f, 0.008f, units=12, out_dtype="int32");',
    "%42 = nn.bias_add(%41, %v_param_20);",
    '%43 = qnn.requantize(%42, 0.0006f, 0, 0.14f, 14, rounding="UPWARD", out_dtype="int8");',
    '%44 = qnn.dequantize(%43, 0.14f, 14, out_dtype="float32");',
    "%45 = nn.softmax(%44);",
    'qnn.quantize(%45, 0.0039f, -128, out_dtype="int8")',
)


@pytest.mark.parametrize(
    "lines, elements, shape",
    [
        (KWS_TAIL, 12, (1, 12)),  # reshape [-1, 64] -> dense units=12 -> same-shape ops
        (KWS_TAIL, 24, (2, 12)),  # the batch comes from the element count
        (KWS_TAIL, 13, None),  # not a multiple of units
        (
            ("%3 = nn.conv2d(%x, %w);", "%4 = reshape(%3, newshape=[1, 2]);", "nn.softmax(%4)"),
            2,
            (1, 2),
        ),  # fmt: skip
        (("reshape(%x, newshape=[1, 7, -1])",), 490, (1, 7, 70)),
        (("reshape(%x, newshape=[0, -1])",), 490, None),  # 0 copies a dimension: not followed
        (("reshape(%x, newshape=[-1, -1])",), 490, None),
        (("reshape(%x, newshape=[1, 2])",), 3, None),  # disagrees with the element count
        (('nn.dense(%x, %w, units=12, out_dtype="int32")',), 588, None),  # 4-D operand
        (("nn.dense(reshape(%x, newshape=[1, 490]), %w, units=None)",), 12, (1, 12)),
        (("nn.relu(%x)",), 490, (1, 49, 10, 1)),  # a parameter's own shape
        (("nn.conv2d(%x, %w)",), 490, None),  # not followed
        (("%1 = nn.relu(%2);", "%2 = nn.relu(%1);", "nn.relu(%1)"), 4, None),  # a cycle ends
    ],
)
def test_result_shape_is_followed_back(lines: tuple, elements: int, shape: object) -> None:
    assert result_shapes(relay(*lines), [elements]) == [shape]


def test_tuple_results_each_followed() -> None:
    text = relay(
        "%1 = reshape(%x, newshape=[10, 49]);", "(nn.relu(%1), reshape(%x, newshape=[-1]))"
    )
    assert result_shapes(text, [490, 490]) == [(10, 49), (490,)]
    assert result_shapes(text, [490]) == [None]  # a tuple of two for one output


def test_long_chains_are_followed() -> None:
    lines = [f"%{i} = nn.relu(%{i - 1});" for i in range(1, 20_000)]
    text = relay("%0 = reshape(%x, newshape=[490]);", *lines, "nn.relu(%19999)")
    assert result_shapes(text, [490]) == [(490,)]


@pytest.mark.parametrize(
    "body",
    [
        "%0 = " + " " * 100_000 + "x\n  %0",  # a let without its ';'
        "%0 = nn.relu(%0, " + ", ".join(["1"] * 100_000) + ");\n  %0",  # a cycle, long operands
        "nn.relu(" * 50_000 + "%x" + ")" * 50_000,  # deep nesting
        "nn.dense(reshape(%x, newshape=[1, 490]), %w, units=\u00b2)",  # not an ASCII number
        "nn.dense(reshape(%x, newshape=[1, 490]), %w, units=" + "9" * 5000 + ")",
    ],
)
def test_hostile_text_gives_no_shape(body: str) -> None:
    """Each of these took minutes to hours when the tracer was quadratic (or cubic: the let
    pattern); now each reads its text a bounded number of times."""
    assert result_shapes(relay(body), [490]) == [None]


def test_parameters_read_in_linear_time() -> None:
    assert main_signature("def @main(" + "%a" * 200_000 + ") {\n}\n") == ({}, [])


def test_no_main_or_no_body() -> None:
    assert result_shapes("", [4]) == [None]
    assert result_shapes("def @main(%x: Tensor[(4), int8]) {\n}\n", [4]) == [None]


@pytest.mark.parametrize("stem", ["kws_int8_aot", "kws_int8_aot_usmp", "kws_int8_aot_cmsisnn_usmp"])
def test_corpus_aot_outputs_have_the_reference_shapes(stem: str) -> None:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"{stem}.tar is not in the corpus (MLF_PROJECT_CORPUS or ../shared/mlf)")
    case = corpus_case(archive)
    with open_archive(Path(archive)) as opened:
        model = opened.model(str(case["model_name"]))
    expected = [tuple(shape) for shape, _ in case["outputs"].values()]
    assert [spec.shape for spec in model.outputs] == expected
