"""The generated C of a small model is pinned: a change to the code generator shows up
here as a diff to review (rewrite with `pytest --update-snapshots` when intended)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, bias_spec, build_model, weight_spec

from kiln.compiler import compile, load

SNAPSHOT_DIR = Path(__file__).parent / "snapshots" / "tiny_cnn"


def tiny_cnn(names: list[str] | None = None, description: str | None = None) -> bytes:
    """conv 3x3 (RELU) → average pool → reshape → fully connected → softmax. `names`
    renames every tensor, constants included (tests/test_hostile_injection.py gives it
    hostile ones), `description` sets the model's."""
    rng = np.random.default_rng(42)
    w = weight_spec((4, 3, 3, 1), rng, per_channel_axis=0)
    b = bias_spec(4, rng, input_scale=0.02, weight_scales=w.scale)
    fw = weight_spec((3, 16), rng, per_channel_axis=None)
    fb = bias_spec(3, rng, input_scale=0.03, weight_scales=fw.scale)
    tensors = [
        TensorSpec((1, 8, 8, 1), scale=0.02, zero_point=-5, name="image"),     # 0
        w, b,                                                                   # 1, 2
        TensorSpec((1, 8, 8, 4), scale=0.03, zero_point=-128, name="conv"),    # 3
        TensorSpec((1, 2, 2, 4), scale=0.03, zero_point=-128, name="pool"),    # 4
        TensorSpec((2,), dtype="int32", data=np.array([1, 16], dtype=np.int32)),  # 5
        TensorSpec((1, 16), scale=0.03, zero_point=-128, name="flat"),         # 6
        fw, fb,                                                                 # 7, 8
        TensorSpec((1, 3), scale=0.1, zero_point=3, name="logits"),            # 9
        TensorSpec((1, 3), scale=1 / 256, zero_point=-128, name="probs"),      # 10
    ]
    ops = [
        OpSpec("CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "fused_activation_function": "RELU"}),
        OpSpec("AVERAGE_POOL_2D", [3], [4], {"padding": "VALID", "filter_width": 4,
                                             "filter_height": 4, "stride_w": 4, "stride_h": 4}),
        OpSpec("RESHAPE", [4, 5], [6], {"new_shape": [1, 16]}),
        OpSpec("FULLY_CONNECTED", [6, 7, 8], [9], {}),
        OpSpec("SOFTMAX", [9], [10], {"beta": 1.0}),
    ]
    for t, name in zip(tensors, names or []):
        t.name = name
    extra = {} if description is None else {"description": description}
    return build_model(ops, tensors, inputs=[0], outputs=[10], **extra)


def test_tiny_cnn_matches_tflite_micro():
    data = tiny_cnn()
    art = compile(load(data))
    x = np.random.default_rng(0).integers(-128, 128, size=(1, 8, 8, 1)).astype(np.int8)
    assert_equal_exact(art.run(x)[0], run_reference(data, [x])[0], "tiny_cnn")


def test_generated_c_is_pinned(update_snapshots):
    art = compile(load(tiny_cnn()))
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    if update_snapshots:
        SNAPSHOT_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in sources.items():
            (SNAPSHOT_DIR / name).write_text(text)
    for name, text in sources.items():
        want = (SNAPSHOT_DIR / name).read_text()
        assert text == want, (f"{name} differs from tests/snapshots/tiny_cnn/{name}; review the "
                              "change and run pytest --update-snapshots if it is intended")
