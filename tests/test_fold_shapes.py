"""fold_constants on shape graphs: FILL, ZEROS_LIKE, ONES_LIKE, SHAPE chains and integer
shape arithmetic become constants; whole models stay bit-exact with tflite-micro (TFLite's
reference kernels where tflite-micro lacks the op)."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.passes import fold_constants
from reference import assert_equal_exact, run_reference, run_tflite_ref
from tflite_builder import OpSpec, TensorSpec, build_model, const

Q = dict(scale=0.05, zero_point=-3)


def _run_both(model: bytes, x: np.ndarray, engine: str = "tflm"):
    art = kiln_compile(load(model), board="host")
    got = art.run(x)[0]
    want = (run_reference if engine == "tflm" else run_tflite_ref)(model, [x])[0]
    assert_equal_exact(got, want.reshape(got.shape), "model output")
    return art


def _types(art) -> list[str]:
    return [op["type"] for op in art.report["ops"]]


def lstm_state_model(value: int) -> bytes:
    """What a Keras LSTM with a `None` batch writes for its zero state, feeding an ADD:
    SHAPE(x) → STRIDED_SLICE (the batch, shrunk) → PACK with the units → FILL."""
    tensors = [
        TensorSpec((1, 20), **Q, name="x"),                                 # 0
        TensorSpec((2,), "int32", name="shape"),                            # 1
        const([0]), const([1]), const([1]),                                 # 2, 3, 4
        TensorSpec((), "int32", name="batch"),                              # 5
        const(20, shape=()),                                                # 6
        TensorSpec((2,), "int32", name="dims"),                             # 7
        const(value, "int8", shape=(), **Q),                                # 8
        TensorSpec((1, 20), **Q, name="zeros"),                             # 9
        TensorSpec((1, 20), scale=0.1, zero_point=2, name="y"),             # 10
    ]
    ops = [OpSpec("SHAPE", [0], [1], {"out_type": "int32"}),
           OpSpec("STRIDED_SLICE", [1, 2, 3, 4], [5], {"shrink_axis_mask": 1}),
           OpSpec("PACK", [5, 6], [7], {"values_count": 2, "axis": 0}),
           OpSpec("FILL", [7, 8], [9]),
           OpSpec("ADD", [0, 9], [10])]
    return build_model(ops, tensors, [0], [10])


@pytest.mark.parametrize("value", [0, -3, 57])
def test_fill_from_shape_chain_folds(value):
    model = lstm_state_model(value)
    g = fold_constants(load(model))
    fill = g.tensor(9)
    assert fill.is_const and fill.data.dtype == np.int8
    assert (fill.data == value).all() and fill.data.shape == (1, 20)
    x = np.random.default_rng(value & 0xFF).integers(-128, 128, (1, 20)).astype(np.int8)
    # tflite-micro refuses the model ("Non-constant >dims< tensor is not supported"):
    # its FILL wants constant dims, which is what folding the chain gives.
    with pytest.raises(RuntimeError):
        run_reference(model, [x])
    assert _types(_run_both(model, x, "tflite_ref")) == ["ADD"]


def like_model(ones: bool) -> bytes:
    """x + zeros_like(x) (ZEROS_LIKE), or x + ones_like(x), which the converter writes
    as FILL(SHAPE(x), 1) (TFLite has no ONES_LIKE)."""
    tensors = [TensorSpec((2, 3, 4), **Q, name="x"), TensorSpec((2, 3, 4), **Q, name="like"),
               TensorSpec((2, 3, 4), scale=0.07, zero_point=1, name="y"),
               TensorSpec((3,), "int32", name="shape"), const(1, "int8", shape=(), **Q)]
    like = ([OpSpec("SHAPE", [0], [3], {"out_type": "int32"}), OpSpec("FILL", [3, 4], [1])]
            if ones else [OpSpec("ZEROS_LIKE", [0], [1])])
    return build_model(like + [OpSpec("ADD", [0, 1], [2])], tensors, [0], [2])


@pytest.mark.parametrize("ones", [False, True], ids=["zeros_like", "ones_like"])
def test_zeros_and_ones_like_fold_to_raw_values(ones):
    """The raw value 0 / 1 whatever the quantization (TFLite writes the integers)."""
    model = like_model(ones)
    g = fold_constants(load(model))
    assert g.tensor(1).is_const and (g.tensor(1).data == int(ones)).all()
    x = np.random.default_rng(3).integers(-128, 128, (2, 3, 4)).astype(np.int8)
    # tflite-micro's FILL wants constant dims (see above)
    art = _run_both(model, x, "tflite_ref" if ones else "tflm")
    assert _types(art) == ["ADD"]


def reshape_target_model(chain: list[OpSpec], extra: list[TensorSpec], x_shape, y_shape,
                         target: int) -> bytes:
    """x → RESHAPE(x, <tensor `target` computed by `chain`>) → y, tensors 0 = x, 1 = y."""
    tensors = [TensorSpec(tuple(x_shape), **Q, name="x"), TensorSpec(tuple(y_shape), **Q, name="y")]
    tensors += extra
    ops = chain + [OpSpec("RESHAPE", [0, target], [1])]
    return build_model(ops, tensors, [0], [1])


def test_shape_arithmetic_chain_folds_to_a_view():
    """Flatten as Keras writes it for a None batch: [SHAPE[0], prod(SHAPE[1:])], with
    REDUCE_PROD, SLICE, FLOOR_DIV, CONCATENATION: the RESHAPE becomes a view (no op)."""
    extra = [
        TensorSpec((4,), "int32"),                  # 2  SHAPE(x)
        const([1]), const([3]),                     # 3, 4  slice begin / size
        TensorSpec((3,), "int32"),                  # 5  dims 1..3
        const([0]),                                 # 6  axis
        TensorSpec((1,), "int32"),                  # 7  prod, kept dims
        const([0]), const([1]),                     # 8, 9
        TensorSpec((1,), "int32"),                  # 10 batch
        const([2]),                                 # 11
        TensorSpec((1,), "int32"),                  # 12 prod // 2
        TensorSpec((3,), "int32"),                  # 13 target
        TensorSpec((1,), "int32"),                  # 14 batch * 2 (MUL)
    ]
    chain = [OpSpec("SHAPE", [0], [2], {"out_type": "int32"}),
             OpSpec("SLICE", [2, 3, 4], [5]),
             OpSpec("REDUCE_PROD", [5, 6], [7], {"keep_dims": True}),
             OpSpec("SLICE", [2, 8, 9], [10]),
             OpSpec("FLOOR_DIV", [7, 11], [12]),
             OpSpec("MUL", [10, 11], [14]),
             OpSpec("CONCATENATION", [14, 12, 10], [13], {"axis": 0})]
    model = reshape_target_model(chain, extra, (1, 2, 3, 4), (2, 12, 1), 13)
    g = fold_constants(load(model))
    assert g.tensor(13).data.tolist() == [2, 12, 1]
    assert [op.type for op in g.ops] == ["RESHAPE"]
    x = np.random.default_rng(5).integers(-128, 128, (1, 2, 3, 4)).astype(np.int8)
    assert _types(_run_both(model, x, "tflite_ref")) == []      # tflite-micro: no REDUCE_PROD


def _fold_one(op: str, inputs: list[TensorSpec], out: TensorSpec, options=None):
    """fold_constants over a model holding `op` on constants beside an ADD of the model's
    input (the op's output is no model output, which fold_constants would keep); the
    folded value, or None."""
    tensors = list(inputs) + [out, TensorSpec((1,), **Q), TensorSpec((1,), **Q)]
    n = len(inputs)
    ops = [OpSpec(op, list(range(n)), [n], options or {}),
           OpSpec("ADD", [n + 1, n + 1], [n + 2])]
    g = fold_constants(load(build_model(ops, tensors, [n + 1], [n + 2])))
    t = g.tensor(n)
    return t.data if t.is_const else None


def test_integer_shape_ops_fold_like_tflite():
    i32 = lambda shape: TensorSpec(shape, "int32")          # noqa: E731
    assert _fold_one("RANGE", [const(2, shape=()), const(11, shape=()), const(3, shape=())],
                     i32((3,))).tolist() == [2, 5, 8]
    assert _fold_one("BROADCAST_ARGS", [const([1, 4, 1]), const([3, 1, 5])],
                     i32((3,))).tolist() == [3, 4, 5]
    assert _fold_one("FLOOR_DIV", [const([-7, 7]), const([2, 2])], i32((2,))).tolist() == [-4, 3]
    assert _fold_one("FLOOR_MOD", [const([-7, 7]), const([3, -3])], i32((2,))).tolist() == [2, -2]
    assert _fold_one("MAXIMUM", [const([1, 9]), const([5, 2])], i32((2,))).tolist() == [5, 9]
    assert _fold_one("TRANSPOSE", [const([[1, 2], [3, 4]]), const([1, 0])],
                     i32((2, 2))).tolist() == [[1, 3], [2, 4]]
    assert _fold_one("TILE", [const([1, 2]), const([2])], i32((4,))).tolist() == [1, 2, 1, 2]
    assert _fold_one("BROADCAST_TO", [const([7]), const([3])], i32((3,))).tolist() == [7, 7, 7]
    assert _fold_one("RANK", [const(np.zeros((2, 5, 1)), "int8", **Q)], i32(())) == 3
    assert _fold_one("SUM", [const([[1, 2], [3, 4]]), const([-1])], i32((2,))).tolist() == [3, 7]


def test_what_does_not_fold():
    i32 = lambda shape: TensorSpec(shape, "int32")          # noqa: E731
    # int32 products that would wrap, division by zero, an index out of range
    assert _fold_one("MUL", [const([1 << 20]), const([1 << 12])], i32((1,))) is None
    assert _fold_one("FLOOR_DIV", [const([4]), const([0])], i32((1,))) is None
    assert _fold_one("GATHER", [const([4, 5]), const([2])], i32((1,)), {"axis": 0}) is None
    # arithmetic on quantized values stays in its op
    q = TensorSpec((2,), **Q, data=np.array([1, 2], np.int8))
    assert _fold_one("ADD", [q, q], TensorSpec((2,), **Q)) is None
    # a FILL, RANGE or TILE larger than its output declares (a hostile model)
    assert _fold_one("FILL", [const([1 << 15, 1 << 15]), const(0, shape=())], i32((2,))) is None
    assert _fold_one("RANGE", [const(0, shape=()), const((1 << 31) - 1, shape=()),
                               const(1, shape=())], i32((3,))) is None
    assert _fold_one("TILE", [const([1, 2]), const([1 << 30])], i32((4,))) is None
    # FILL with a shape computed at run time
    tensors = [TensorSpec((2,), "int32"), const(0, "int8", shape=(), **Q), TensorSpec((1, 2), **Q)]
    g = fold_constants(load(build_model([OpSpec("FILL", [0, 1], [2])], tensors, [0], [2])))
    assert [op.type for op in g.ops] == ["FILL"]
