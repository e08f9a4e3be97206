"""The generator checks its graph tables by the runtime's rules (mlf_graph_check) before it
writes them: one bad-table fixture per rule, each refused with what broke it."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict

import pytest

from project_api.errors import GenerateError
from project_api.generate.table_check import check_tables, table_problems
from project_api.generate.tables import MLF_FUNC_COPY, Arg, GraphTables, Op, View
from project_api.read.dtypes import DType, parse_dtype

F32 = parse_dtype("float32")


def good_tables() -> GraphTables:
    """x + p -> y, with p's pool (1) bound to params at offset 64."""
    return GraphTables(
        num_nodes=4,
        ops=[Op(0, (0, 1, 2), 1, 3)],
        funcs=["add"],
        views=[View(0, (4,), F32), View(1, (4,), F32), View(2, (4,), F32)],
        storage_bytes=[16, 16, 16],
        args=[Arg("x", 0, 0), Arg("p", 1, 1)],
        outputs=[2],
    )


BOUND = {1: 64}


def _view(index: int, **change: object) -> Callable[[GraphTables], None]:
    def apply(t: GraphTables) -> None:
        t.views[index] = dataclasses.replace(t.views[index], **change)  # type: ignore[arg-type]

    return apply


def _op(**change: object) -> Callable[[GraphTables], None]:
    def apply(t: GraphTables) -> None:
        t.ops[0] = dataclasses.replace(t.ops[0], **change)  # type: ignore[arg-type]

    return apply


def _copy_between_sizes(t: GraphTables) -> None:
    t.views.append(View(2, (2,), F32))
    t.ops.append(Op(MLF_FUNC_COPY, (2, 3), 1, 5))


def _second_viewer(t: GraphTables) -> None:
    t.args.append(Arg("q", 1, 2))


def _written(t: GraphTables) -> None:
    t.ops.append(Op(0, (0, 2, 1), 1, 5))


BAD: Dict[str, Callable[[GraphTables], None]] = {
    "65536 functions (at most 65535)": lambda t: setattr(t, "funcs", ["f"] * 65536),
    "view 0 names pool 7 of 3": _view(0, storage=7),
    "view 0 has an empty dtype": _view(0, dtype=DType(F32.code, 0, 1)),
    "view 1 has a negative dimension": _view(1, shape=(-4,)),
    "view 2 takes 20 bytes of pool 2, which has 16": _view(2, shape=(5,)),
    "operator 0 (node 3) calls function 1 of 1": _op(func=1),
    "operator 0 (node 3) has 4 outputs among 3 args": _op(num_outputs=4),
    "operator 0 (node 3) names a view beyond the 3": _op(args=(0, 1, 3)),
    "operator 1 (node 5) copies between different sizes": _copy_between_sizes,
    "arg 1 names view 9 of 3": lambda t: t.args.__setitem__(1, Arg("p", 9, 1)),
    "output 0 names view 3 of 3": lambda t: t.outputs.__setitem__(0, 3),
    "params bound to pool 1: 2 args view it": _second_viewer,
    "params bound to pool 1: 1 args view it, an operator writes it": _written,
}


def test_good_tables_pass() -> None:
    assert table_problems(good_tables(), BOUND) == []
    check_tables(good_tables(), BOUND, "m")


@pytest.mark.parametrize("problem", sorted(BAD))
def test_each_rule_refuses_its_bad_tables(problem: str) -> None:
    tables = good_tables()
    BAD[problem](tables)
    problems = table_problems(tables, BOUND)
    assert len(problems) == 1 and problems[0].startswith(problem)
    with pytest.raises(GenerateError, match="model m: the graph tables break the runtime's rules"):
        check_tables(tables, BOUND, "m")


@pytest.mark.parametrize("bound, problem", [({1: 32}, "offset 32"), ({5: 0}, "pool 5 of 3")])
def test_params_bound_where_the_runtime_cannot_use_them(
    bound: Dict[int, int], problem: str
) -> None:
    (found,) = table_problems(good_tables(), bound)
    assert found.startswith("params bound to pool") and problem in found
