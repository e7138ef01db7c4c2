"""Lowerings: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV (int8, and 16x8:
int16 activations with int8 weights, in the last section).

Every parameter the kernels need is derived here, at compile time, exactly as
tflite-micro's Prepare() derives it (kernels/conv_common.cc,
depthwise_conv_common.cc, fully_connected_common.cc, transpose_conv.cc and
kernel_util.cc's PopulateConvolutionQuantizationParams):

- padding: TFLite's ComputePaddingHeightWidth (padding before = total // 2);
- multipliers: per output channel, input_scale * filter_scale / output_scale in
  double from the float32 scales; except per-tensor FULLY_CONNECTED, whose
  product input_scale * filter_scale is rounded to float32 first;
- CONV_2D and FULLY_CONNECTED get a folded bias (bias + input_offset * sum of
  the filter row, see crt/kernels/conv.h), so their inner loop is a plain int8
  dot product.

The variant choice and its scratch size come from one function per op
(`conv2d_variant`, `dwconv2d_variant`, `fully_connected_variant`) given the layer's
shape and the target's CPU features; `candidates` lists every variant's knobs for a
tuner. Tests pin the scratch sizes against the C `_get_buffer_size` functions. The SIMD
variants (targets with the DSP extension) read filters packed here into int16 pairs (or,
for the int8-weight gemm, int8 words), in the block order of the kernel the knobs pick:
the knobs are a kernel and a layout together, so a record of them replays exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...ir import Tensor
from ...numerics import activation_range, quantize_multiplier, requantize
from ...errors import ModelError
from ..bounds import Extreme, extremes, window_extremes
from ..lowering import (LayerCode, LowerCtx, Target, c_dims, fused_range, lowering,
                        per_channel_multipliers, qparams)
from .conv_mve import (MVE_DWCONV, MVE_FC, conv2d_mve_body, conv2d_mve_kernel,
                       conv2d_mve_scratch, dwconv2d_mve_body, dwconv2d_mve_scratch,
                       fully_connected_mve_body, mve_candidates)

_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
# The bias types TFLM's 16x8 kernels take, per op: int64 everywhere (or none); CONV_2D and
# FULLY_CONNECTED also int32 (their "narrow" int32 arithmetic, see crt/kernels/conv.h);
# TRANSPOSE_CONV an int16 bias, which TFLM widens to int64 (so does the compiler).
_BIAS16 = {"CONV_2D": ("int64", "int32"), "FULLY_CONNECTED": ("int64", "int32"),
           "DEPTHWISE_CONV_2D": ("int64",), "TRANSPOSE_CONV": ("int64", "int16")}
_INT32_MAX = (1 << 31) - 1


# --- geometry ------------------------------------------------------------------------

def _c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def out_size(padding: str, in_size: int, k: int, stride: int, dilation: int) -> int:
    """TFLite's ComputeOutSize."""
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        return _c_div(in_size + stride - 1, stride)
    return _c_div(in_size + stride - eff, stride)


def pad_before(padding: str, in_size: int, k: int, stride: int, dilation: int) -> int:
    """TFLite's ComputePaddingHeightWidth for one axis: the padding before (top/left)."""
    out = out_size(padding, in_size, k, stride, dilation)
    eff = (k - 1) * dilation + 1
    total = max(0, (out - 1) * stride + eff - in_size)
    return total // 2


@dataclass
class ConvGeometry:
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]        # before (top, left)
    padding_name: str


def _geometry(ctx: LowerCtx, in_hw: tuple[int, int], k_hw: tuple[int, int],
              dilated: bool = True) -> ConvGeometry:
    o = ctx.op.options
    stride = (int(o.get("stride_h", 1)), int(o.get("stride_w", 1)))
    dilation = ((int(o.get("dilation_h_factor", 1)), int(o.get("dilation_w_factor", 1)))
                if dilated else (1, 1))
    name = o.get("padding", "VALID")
    pad = tuple(pad_before(name, in_hw[i], k_hw[i], stride[i], dilation[i]) for i in range(2))
    return ConvGeometry(stride, dilation, pad, name)  # type: ignore[arg-type]


@extremes("CONV_2D", "DEPTHWISE_CONV_2D")
def _window_extremes(ctx: LowerCtx) -> list[Extreme]:
    """Index arithmetic of the sliding-window kernels (conv2d*.c, dwconv*.c,
    conv_inplace.c) along both axes; the scratch and the tensors are bounded elsewhere."""
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    return [e for i, axis in enumerate("hw")
            for e in window_extremes(axis, x.shape[1 + i], y.shape[1 + i], w.shape[1 + i],
                                     g.stride[i], g.dilation[i], g.padding[i])]


# --- variants --------------------------------------------------------------------------
#
# The kernel of a layer and its scratch come from one function per op, given the layer's
# shape and the target's CPU features; `knobs` picks a candidate explicitly (a tuner
# enumerates them with `candidates`), None takes the default, the first candidate. The
# C twins of the scratch sizes are the kernels' _get_buffer_size functions (tests pin
# them).

@dataclass(frozen=True)
class LayerShape:
    """What the variant choice of one conv-family layer depends on."""

    input: tuple[int, int, int, int]        # NHWC (FULLY_CONNECTED: batches, 1, 1, depth)
    filter: tuple[int, int, int, int]       # OHWI / 1HWC / (units, 1, 1, depth)
    output: tuple[int, int, int, int]
    padding: tuple[int, int] = (0, 0)       # before (top, left)
    dilation: tuple[int, int] = (1, 1)
    depth_multiplier: int = 1
    requant_fast: bool = True               # every live channel's shift <= -2 (conv.h)
    pairs8: bool = True                     # the filter packs as int8 pairs (pairs8_ok)
    # FULLY_CONNECTED: one requantization for every row, within the ranges of the
    # per-tensor rows kernels (fc_per_tensor_ok), which the rows knobs then pick
    per_tensor: bool = False
    # Not in the variant choice, but in the timing (a tuner's workload key):
    stride: tuple[int, int] = (1, 1)
    clamped: bool = False                   # activation range narrower than int8's
    dtype: str = "int8"                     # activations: int8, or int16 (16x8 layers)
    # Not in either: what picks a kernel's lean entry point (lean_entries).
    relu_floor: bool = False                # unclamped, output zero point -128 (a RELU)


@dataclass(frozen=True)
class Variant:
    kernel: str
    knobs: dict
    scratch: int


def _round_up4(n: int) -> int:
    return (n + 3) // 4 * 4


# The SIMD kernels by knobs (conv.h): CONV_2D gemm by (oc_block, weights), FULLY_CONNECTED
# rows by row_block. Within an op they share their signature and scratch. The 2x2 gemm
# leads the int16 ones (the one --optimize speed widens to): its channel pairs run in one
# asm loop (conv2d_gemm.c's pairs_2x2), on QEMU mps2-an386 0.82-0.91x oc4's instructions
# on every convolution of KWS, VWW and ResNet-8.
_GEMM_KERNELS = {(2, "s16"): "kiln_conv2d_gemm_s8", (4, "s16"): "kiln_conv2d_gemm_oc4_s8",
                 (2, "s8"): "kiln_conv2d_gemm_w8_s8"}
# Int8 channel/row pairs (conv_dsp.h): the default where the filter allows it.
_GEMM_P8 = {"variant": "gemm", "oc_block": 4, "px_block": 2, "weights": "p8"}
_FC_P8 = {"variant": "rows", "row_block": 8, "weights": "p8"}
_FC_ROWS_KERNELS = {8: "kiln_fully_connected_rows8_s8", 4: "kiln_fully_connected_rows_s8",
                    2: "kiln_fully_connected_rows2_s8"}
# The same knobs on a per-tensor layer (LayerShape.per_tensor): one asm loop over the
# blocks of eight rows, requantization included (fully_connected_rows.c).
_FC_P8_PT = "kiln_fully_connected_rows8_p8_pt_s8"
_FC_PT = {8: "kiln_fully_connected_rows8_pt_s8", 6: "kiln_fully_connected_rows6_pt_s8"}
# Their bounds: shift >= -22 keeps (2 * output_offset + 1) << (-shift - 1) within 2^29,
# sums below 2^30 may be doubled.
_PT_MIN_SHIFT = -22
# DEPTHWISE_CONV_2D by (variant, ch_block); all take a folded bias and C bytes of scratch.
_DW_KERNELS = {("3x3", 4): "kiln_dwconv2d_3x3_s8", ("channels", 4): "kiln_dwconv2d_ch4_s8"}
_DW_PX2_MIN_WIDTH = 12         # output rows from this wide lead with it (candidates)
# Its knob: output columns per ring pass (the scratch holds 3 rows of them). 24 keeps
# VWW's arena (its 48x48 layer's ring fits the 400 B beside the peak); wider is the
# whole row.
_DW_PX2_TILES = (8, 16, 24)
_DW_PX2_TILE = 24
# Words a row of kiln_dwconv2d_3x3_planes_s8's planes (fixed: its loops address the
# three filter rows by immediate offsets): output rows up to 15 pixels at stride 2.
_DW_PLANES_ROW_WORDS = 16
# A depthwise layer with one input channel as a CONV_2D gemm, by (oc_block, weights).
_DW_GEMM_KNOBS = ((2, "s16"), (4, "s16"), (2, "s8"))


def _interior_share(shape: LayerShape) -> float:
    """The share of a depthwise layer's output pixels whose taps all lie in the image."""
    inside = 1.0
    for i in range(2):
        size, out, k = shape.input[1 + i], shape.output[1 + i], shape.filter[1 + i]
        stride, pad, dil = shape.stride[i], shape.padding[i], shape.dilation[i]
        span = (k - 1) * dil
        lo = -(-pad // stride)
        hi = (size - 1 - span + pad) // stride + 1 if size - 1 - span + pad >= 0 else 0
        inside *= max(0, min(hi, out) - min(lo, out)) / out
    return inside


def candidates(op: str, shape: LayerShape, target: Target) -> list[dict]:
    """Every variant (as knobs) that can run `op` of this shape on `target`, the default
    first. A tuner times them; the C of each is bit-exact with the others.

    Order matters twice: the default is the variant fastest on typical layers (compiles
    without tuning records use it), and a tuner that breaks ties or stops early favours
    the front. The int8-weight gemm comes after every int16 one: it is slower and only
    worth it when flash is short.

    The blocked kernels (gemm, 3x3, channels, rows) are SIMD on cores with the DSP
    extension and plain C elsewhere. Without DSP they stay behind the plain kernels, as
    the tuner still times them: on QEMU mps2-an385 (Cortex-M3) the gemm takes 1.0-1.6x
    fewer instructions than the plain kernels on the 1x1 convolutions of KWS, VWW and
    ResNet-8 while the plain conv stays ahead on 3x3 ones, and on the micro:bit's
    Cortex-M0 and on the host the blocked C kernels lose to the plain ones. The one rule
    without a loser: on Cortex-M3 the 3x3 depthwise kernel takes 1.7-2.1x fewer
    instructions than the plain one on every such layer of KWS and VWW, so it leads
    there."""
    _, kh, kw, fc = shape.filter
    if shape.dtype == "int16":
        return _candidates16(op, shape, target)
    blocked: list[dict] = []      # the blocked kernels this layer can use
    plain: list[dict] = []
    if op == "CONV_2D":
        groups = shape.input[3] // fc
        if shape.requant_fast and groups == 1:
            if shape.pairs8:
                blocked.append(dict(_GEMM_P8))
            blocked += [{"variant": "gemm", "oc_block": oc, "px_block": 2, "weights": w}
                        for oc, w in _GEMM_KERNELS]
        if kh == kw == 1 and groups == 1 and shape.padding == (0, 0):
            plain.append({"variant": "1x1"})
    elif op == "DEPTHWISE_CONV_2D":
        # The 3x3 kernel unrolls its nine taps through a pointer table; the channels
        # kernel walks any filter in run-time loops: on QEMU mps2-an386 1.4-2.4x the 3x3
        # kernel's instructions on a 3x3, yet 1.1-2.8x fewer than the plain kernel's on
        # every layer measured (its last C % 4 channels reuse the pixel's last word, so
        # it needs C >= 4).
        if shape.requant_fast and shape.depth_multiplier == 1:
            if kh == kw == 3 and shape.dilation == (1, 1) and fc % 4 == 0:
                # The int8-filter 3x3 kernel leads where most pixels are interior ones
                # (dwconv_3x3_w8.c): on QEMU mps2-an386 0.79-0.96x the int16 one's
                # instructions on VWW's layers with 0.84 or more of the pixels inside,
                # 1.04-1.44x with 0.69 or less (12x12 to 3x3 maps, KWS's 25x5).
                w8 = {"variant": "3x3_w8"}
                packed = {"variant": "3x3", "ch_block": 4}
                blocked += [w8, packed] if _interior_share(shape) >= 0.8 else [packed, w8]
            if kh == kw == 3 and shape.dilation == (1, 1) and shape.stride[1] == 1:
                # Pixel pairs over a ring of padded rows (dwconv_3x3_px2.c), any C. On
                # QEMU mps2-an386 0.71-0.85x the instructions of the kernels above on
                # VWW's stride-1 layers with rows of 12 to 48 pixels; its set-up per
                # block of channels and output row makes it 1.1-2x theirs on 6x6 and
                # smaller maps and on KWS's 25x5 (run in one-row bands), where it
                # leads only when C % 4 != 0 (0.5x the channels kernel's).
                first = shape.output[2] >= _DW_PX2_MIN_WIDTH or fc % 4 != 0
                blocked[0 if first else len(blocked):0] = _dw_px2_knobs(shape, "3x3_px2")
            if kh == kw == 3 and shape.dilation == (1, 1) and shape.stride[0] == 1:
                # The same with the pairs along y ("3x3_px2v"), for tall narrow maps:
                # KWS's 25x5 (rows of five pixels leave horizontal pairs little to
                # share) leads with it, and its banded twin runs the layer in one call.
                tall = shape.output[2] < _DW_PX2_MIN_WIDTH <= shape.output[1]
                blocked[0 if tall else len(blocked):0] = _dw_px2_knobs(shape, "3x3_px2v")
            if kh == kw == 3 and shape.dilation == (1, 1) and _dw_planes_scratch(shape):
                # A channel at a time over int16 planes (dwconv_3x3_planes.c), any C:
                # leads on stride 2 and on maps up to 12x12, where the kernels above
                # spend their time on edge pixels and per-block set-up (on QEMU
                # mps2-an386 0.65-0.84x their instructions on VWW's 12x12 stride-2,
                # 6x6 and 3x3 layers), but not on rows under three pixels (unmeasured).
                # With C % 4 != 0 the pixel pairs keep stride 1 (the planes fill a last
                # block in C; unmeasured). Maps of 12x12 too: on VWW's 12x12x64 stride-1
                # layer 2.31 instructions a MAC against px2's 2.79 (per-line work on
                # 12-pixel lines); at 24x24 its planes of the whole map (6.5 KB) would
                # raise VWW's arena.
                small = max(shape.output[1], shape.output[2]) <= _DW_PX2_MIN_WIDTH
                lead = ((shape.stride[1] == 2 or small and fc % 4 == 0)
                        and shape.output[2] >= 3)
                blocked.insert(0 if lead else len(blocked), {"variant": "3x3_planes"})
            if kh == kw == 3 and shape.dilation == (1, 1) and shape.stride == (2, 2):
                # Stride 2, a channel at a time over a ring of one widened line
                # (dwconv_3x3_s2ring.c), any C, in raster order (its output may sit
                # exactly on its input, ops/inplace.py): leads where the planes do not
                # fit the rows (VWW's 48x48x16 layer), where its assembly runs (a clamped
                # output takes its C path, about 7 instructions a MAC on the M4).
                lead = target.dsp and not shape.clamped and not _dw_planes_scratch(shape)
                blocked.insert(0 if lead else len(blocked), {"variant": "3x3_s2ring"})
            if kh == kw == 3 and shape.dilation == (1, 1) and _dw_tiny_scratch(shape):
                # 3x3 output maps, only the taps in the image (dwconv_3x3_tiny.c): leads
                # where its straight-line assembly runs (DSP cores, full-range output,
                # C >= 4: 3x3 -> 3x3 at stride 1 and 6x6 -> 3x3 at stride 2, SAME): on
                # QEMU mps2-an386 VWW's 3x3x32 1.64 instructions/MAC (planes 2.76), its
                # 3x3x28 stride 2 2.26 (planes 3.64). Its C path comes last: on
                # mps2-an385 about twice the 3x3 kernel's instructions on those layers.
                lead = target.dsp and not shape.clamped and fc >= 4 and _dw_tiny_asm(shape)
                blocked.insert(0 if lead else len(blocked), {"variant": "3x3_tiny"})
            if fc >= 4:
                blocked.append({"variant": "channels", "ch_block": 4})
        # One input channel: output channel oc is a CONV_2D filter over that channel, so
        # the layer runs as one (the gemm kernels, filter transposed to OHWI at compile
        # time): TFLM's micro_speech (10x8 filter, multiplier 8) on QEMU mps2-an386 from
        # 12 to 2.2 instructions per MAC (the 2x2 gemm; oc4 2.3).
        if shape.requant_fast and shape.input[3] == 1 and shape.depth_multiplier > 1:
            blocked += [{"variant": "gemm", "oc_block": oc, "px_block": 2, "weights": w}
                        for oc, w in _DW_GEMM_KNOBS]
    elif op == "FULLY_CONNECTED":
        if shape.requant_fast:
            if shape.pairs8:
                blocked.append(dict(_FC_P8))
            if shape.per_tensor:
                # The fastest int16 twin (six rows, two rows' words per LDM): AD's
                # --optimize speed build on QEMU mps2-an386 takes 218,339 instructions
                # with it, 239,132 with rows8_pt.
                blocked.append({"variant": "rows", "row_block": 6})
            blocked += [{"variant": "rows", "row_block": b} for b in _FC_ROWS_KERNELS]
            if shape.pairs8:
                # As a 1x1 CONV_2D over its rows (the int8-pair gemm): slower than the
                # rows kernels, but a model whose convolutions link the gemm anyway saves
                # the rows kernel's code on a small layer (codegen/fit.py share_code).
                blocked.append(dict(_GEMM_P8))
    else:
        raise ValueError(f"no variants for {op}")
    plain.append({"variant": "generic"})
    if target.mve:      # Helium first (conv_mve.py), then the DSP ones as on other cores
        blocked = mve_candidates(op, shape) + blocked
    if target.dsp:
        return blocked + plain
    if target.cpu == "cortex-m3":
        # The plain-C 3x3 kernel leads where it would lead the blocked kernels but for
        # the pixel-pair and plane ones (measured on the M4; their plain-C twins are
        # untimed here).
        older = [k for k in blocked
                 if not k["variant"].startswith(("3x3_px2", "3x3_planes", "3x3_s2ring",
                                                 "3x3_tiny"))]
        if older and older[0]["variant"] == "3x3":
            return older[:1] + plain + [k for k in blocked if k is not older[0]]
    return plain + blocked


def _candidates16(op: str, shape: LayerShape, target: Target) -> list[dict]:
    """16x8 CONV_2D and FULLY_CONNECTED: the SIMD kernels on int16 pairs ("dsp",
    conv16_dsp.c), with the weights packed as int16 pairs ("s16") or kept int8 ("s8",
    half the flash, widened at run time), and the plain kernel. On cores with the DSP
    extension the SIMD ones come first (on QEMU mps2-an386 the SEANet conv takes 0.30x
    the plain kernel's instructions with s16 weights, 0.40x with s8), elsewhere last,
    where their pairs are plain C."""
    plain = [{"variant": "generic"}]
    if op == "DEPTHWISE_CONV_2D":
        # Blocks of four channels summed in int32 registers: at most 256 taps (conv16_dsp.c).
        ok = shape.depth_multiplier == 1 and shape.filter[1] * shape.filter[2] <= 256
        simd = [{"variant": "channels", "ch_block": 4}] if ok else []
        return simd + plain if target.dsp else plain + simd
    if op not in ("CONV_2D", "FULLY_CONNECTED"):
        raise ValueError(f"no 16x8 variants for {op}")
    simd = [{"variant": "dsp", "weights": "s16"}, {"variant": "dsp", "weights": "s8"}]
    return simd + plain if target.dsp else plain + simd


def _dw_px2_knobs(shape: LayerShape, variant: str) -> list[dict]:
    """kiln_dwconv2d_3x3_px2[v]_s8 by tile (output pixels per ring pass along the pairs'
    axis, x or y for px2v, even; the whole line rounded up to even is the widest), the
    default first: _DW_PX2_TILE or the line."""
    line = (shape.output[1 if variant == "3x3_px2v" else 2] + 1) // 2 * 2
    tiles = [t for t in _DW_PX2_TILES if t < line] + [line]
    default = min(_DW_PX2_TILE, line)
    return [{"variant": variant, "tile": t}
            for t in [default] + [t for t in tiles if t != default]]


def _dw_planes_scratch(shape: LayerShape) -> int:
    """kiln_dwconv2d_3x3_planes_s8_get_buffer_size: four int16 planes of the input rows
    the outputs read, rows of _DW_PLANES_ROW_WORDS words; 0 where it does not apply
    (horizontal stride above 2, rows wider than that)."""
    (_, out_h, out_w, _), (stride_h, stride_w) = shape.output, shape.stride
    if stride_w > 2 or ((out_w - 1) * stride_w + 4) // 2 > _DW_PLANES_ROW_WORDS:
        return 0
    return 4 * 4 * _DW_PLANES_ROW_WORDS * ((out_h - 1) * stride_h + 3)


def _dw_tiny_scratch(shape: LayerShape) -> int:
    """kiln_dwconv2d_3x3_tiny_s8_get_buffer_size: the int16 pairs of a block of four
    channels (six input rows of three pairs at most); 0 where it does not apply (output
    maps other than 3x3, strides above 2)."""
    if shape.output[1:3] != (3, 3) or max(shape.stride) > 2:
        return 0
    return 6 * 3 * 4 * 4


def _dw_tiny_asm(shape: LayerShape) -> bool:
    """The geometries kiln_dwconv2d_3x3_tiny_s8 runs in assembly on DSP cores: a square
    input of 3 at stride 1 with one pixel of padding, or of 6 at stride 2 with none
    before (SAME)."""
    (_, in_h, in_w, _), (stride_h, stride_w) = shape.input, shape.stride
    pad_h, pad_w = shape.padding
    if in_h != in_w or stride_h != stride_w or pad_h != pad_w:
        return False
    return (in_w, stride_w, pad_w) in ((3, 1, 1), (6, 2, 0))


def _pick(op: str, shape: LayerShape, target: Target, knobs: dict | None) -> dict:
    options = candidates(op, shape, target)
    if knobs is None:
        return options[0]
    if knobs not in options:
        raise ModelError(f"{op}: knobs {knobs} are not a candidate for this layer on "
                         f"{target.board} (candidates: {options})")
    return knobs


def conv2d_variant(shape: LayerShape, target: Target, knobs: dict | None = None) -> Variant:
    """(kernel, knobs, scratch bytes) of a CONV_2D. C twins of the sizes:
    kiln_conv2d_s8_get_buffer_size, kiln_conv2d_gemm[_oc4|_w8]_s8_get_buffer_size."""
    k = _pick("CONV_2D", shape, target, knobs)
    _, kh, kw, fc = shape.filter
    if k["variant"] == "mve":
        return Variant(conv2d_mve_kernel(k), k, conv2d_mve_scratch(shape, k))
    if k["variant"] == "gemm":
        row4 = _round_up4(kw * fc)            # a kernel row, padded to whole words
        kernel = ("kiln_conv2d_gemm_p8_s8" if k["weights"] == "p8"
                  else _GEMM_KERNELS[k["oc_block"], k["weights"]])
        return Variant(kernel, k, 4 * kh * row4 + row4)
    if k["variant"] == "1x1":
        return Variant("kiln_conv2d_1x1_s8", k, 0)
    return Variant("kiln_conv2d_s8", k, kh * kw * fc)


def dwconv2d_variant(shape: LayerShape, target: Target, knobs: dict | None = None) -> Variant:
    """(kernel, knobs, scratch bytes) of a DEPTHWISE_CONV_2D; C twins of the size:
    kiln_dwconv2d_3x3_s8_get_buffer_size, kiln_dwconv2d_ch4_s8_get_buffer_size (a pixel
    of padding); kiln_dwconv2d_3x3_px2_s8 derives its tile from the scratch it gets."""
    k = _pick("DEPTHWISE_CONV_2D", shape, target, knobs)
    if k["variant"] == "mve":
        return Variant(MVE_DWCONV, k, dwconv2d_mve_scratch(shape.input[3], *shape.filter[1:3]))
    if k["variant"] == "generic":
        return Variant("kiln_dwconv2d_s8", k, 0)
    if k["variant"] == "gemm":         # as the CONV_2D with filter (C_out, KH, KW, 1)
        _, kh, kw, out_c = shape.filter
        return conv2d_variant(replace(shape, filter=(out_c, kh, kw, 1), depth_multiplier=1),
                              target, k)
    if k["variant"] == "3x3_w8":
        return Variant("kiln_dwconv2d_3x3_w8_s8", k, shape.input[3])
    if k["variant"] == "3x3_planes":
        return Variant("kiln_dwconv2d_3x3_planes_s8", k, _dw_planes_scratch(shape))
    if k["variant"] == "3x3_s2ring":     # a ring of one line of W + 1 int16 pairs
        return Variant("kiln_dwconv2d_3x3_s2ring_s8", k, 4 * (shape.output[2] + 1))
    if k["variant"] == "3x3_tiny":
        return Variant("kiln_dwconv2d_3x3_tiny_s8", k, _dw_tiny_scratch(shape))
    if k["variant"] in ("3x3_px2", "3x3_px2v"):     # a ring of three lines of tile + 2 words
        return Variant(f"kiln_dwconv2d_{k['variant']}_s8", k, 12 * (k["tile"] + 2))
    return Variant(_DW_KERNELS[k["variant"], k["ch_block"]], k, shape.input[3])


def fully_connected_variant(shape: LayerShape, target: Target,
                            knobs: dict | None = None) -> Variant:
    """(kernel, knobs, scratch bytes) of a FULLY_CONNECTED; C twin of the size:
    kiln_fully_connected_rows[2|8]_s8_get_buffer_size."""
    k = _pick("FULLY_CONNECTED", shape, target, knobs)
    if k["variant"] == "mve":
        return Variant(MVE_FC, k, 0)
    if k["variant"] == "gemm":          # as the 1x1 CONV_2D (conv2d_variant's scratch)
        return Variant("kiln_conv2d_gemm_p8_s8", k, 5 * _round_up4(shape.filter[3]))
    if k.get("weights") == "p8":        # widens its input in registers: no scratch
        return Variant(_FC_P8_PT if shape.per_tensor else "kiln_fully_connected_rows8_p8_s8",
                       k, 0)
    if k["variant"] == "rows" and k["row_block"] in _FC_PT and shape.per_tensor:
        return Variant(_FC_PT[k["row_block"]], k, 0)    # int16, input widened in registers
    if k["variant"] == "rows":
        return Variant(_FC_ROWS_KERNELS[k["row_block"]], k, 2 * _round_up4(shape.filter[3]))
    return Variant("kiln_fully_connected_s8", k, 0)


def fc_per_tensor_ok(mult: np.ndarray, shift: np.ndarray, folded: np.ndarray,
                     abs_weight_sums: np.ndarray, abs_odd_sums: np.ndarray | None) -> bool:
    """Whether a FULLY_CONNECTED runs on the per-tensor rows kernels (conv.h): one
    multiplier and shift for every row, the shift in [-22, -2], every row's sum below 2^30
    whatever the int8 input (|folded bias| + 128 * sum |w|: it is doubled) and, for the
    int8 pairs (abs_odd_sums: sum |w| of each pair's second row), the second row's sum,
    bias included, below 2^23 (it comes back from raw - even)."""
    if mult.size == 0 or (mult != mult[0]).any() or (shift != shift[0]).any():
        return False
    if not _PT_MIN_SHIFT <= int(shift[0]) <= -2:
        return False
    bound = np.abs(folded.astype(np.int64)) + 128 * abs_weight_sums.astype(np.int64)
    if bound.size and int(bound.max()) >= 1 << 30:
        return False
    if abs_odd_sums is not None:
        b_odd = folded.astype(np.int64)[1::2]      # a lone last row pairs a zero one
        odd = np.abs(b_odd) + 128 * abs_odd_sums.astype(np.int64)[:b_odd.size]
        if odd.size and int(odd.max()) >= 1 << 23:
            return False
    return True


def pt_bias_p8(folded: np.ndarray) -> np.ndarray:
    """kiln_fully_connected_rows8_p8_pt_s8's accumulator starts: per row pair (c, d) the raw
    one, b_c + 256 * b_d modulo 2^32, then the even one, b_c (a lone last row: d's zero)."""
    b = folded.astype(np.int64)
    if b.size % 2:
        b = np.concatenate([b, np.zeros(1, np.int64)])
    c, d = b[0::2], b[1::2]
    raw = (c + 256 * d) & 0xFFFFFFFF
    return np.stack([raw, c & 0xFFFFFFFF], axis=1).reshape(-1).astype(np.uint32).view(np.int32)


def _live_shifts_fast(shift: np.ndarray, abs_weight_sums: np.ndarray) -> bool:
    """Every channel with a nonzero filter has shift <= -2 (kiln_requant_fast_t)."""
    live = shift[abs_weight_sums > 0]
    return bool(live.size == 0 or int(live.max()) <= -2)


def requant_fast(mult: np.ndarray, shift: np.ndarray, bias: np.ndarray,
                 abs_weight_sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kiln_requant_fast_t triples as int32 [n, 3], bias) for the SIMD variants.

    A channel whose filter is all zeros computes the constant requantize(bias); it gets
    multiplier 2^30, shift -2 and bias 8 * that constant (clipped to +-512, which the
    output clamp cannot tell apart), which requantizes to the same value."""
    mult = mult.astype(np.int64).copy()
    shift = shift.astype(np.int64).copy()
    bias = bias.astype(np.int64).copy()
    for c in np.flatnonzero(shift > -2):
        if abs_weight_sums[c] != 0:
            raise ValueError("a live channel has shift > -2; use the plain kernels")
        value = int(np.clip(requantize(np.array([bias[c]]), np.array([mult[c]]),
                                       np.array([shift[c]]))[0], -512, 512))
        mult[c], shift[c], bias[c] = 1 << 30, -2, 8 * value
        assert int(requantize(np.array([bias[c]]), np.array([mult[c]]),
                              np.array([shift[c]]))[0]) == value
    table = np.stack([mult, 1 << (-shift - 2), -shift - 1], axis=1)
    return table.astype(np.int32), bias


def _requant_fast_c(ctx: LowerCtx, table: np.ndarray) -> str:
    name = ctx.const("requant", table.reshape(-1), "int32_t",
                     "kiln_requant_fast_t per channel: multiplier, round, right shift")
    return f"static const kiln_requant_fast_t *const quant = (const kiln_requant_fast_t *){name};"


def _fits_int16(values: np.ndarray) -> bool:
    return bool(values.size == 0 or (values.min() >= -(1 << 15) and values.max() < (1 << 15)))


def _requant_packed_c(ctx: LowerCtx, table: np.ndarray, bias16: str = "NULL") -> str:
    """kiln_requant_packed_t of the int8-pair kernels: requant_fast's table as TFLite's
    multiplier (int32) and shift (int8) per channel, five bytes instead of twelve;
    `bias16`: the name of the layer's int16 biases (the pixel-pair kernels only)."""
    mult = ctx.const("mult", table[:, 0].astype(np.int32), "int32_t", "multiplier per channel")
    shift = ctx.const("shift", (-table[:, 2] - 1).astype(np.int8), "int8_t",
                      "shift per channel (<= -2)")
    return f"static const kiln_requant_packed_t quant = {{{mult}, {shift}, {bias16}}};"


# --- packed filters for the SIMD variants (layouts in crt/kernels/conv.h) ----------------

def _padded(rows: np.ndarray) -> np.ndarray:
    """(R, K) ints → (R, G, 4) int64, K zero-padded to 4 * G."""
    r, k = rows.shape
    padded = np.zeros((r, _round_up4(k)), dtype=np.int64)
    padded[:, :k] = rows
    return padded.reshape(r, -1, 4)


def _pair_words(rows: np.ndarray) -> np.ndarray:
    """(R, K) ints → (R, G, 2) uint32: per group of four k, A = (k0, k2), B = (k1, k3),
    two int16 lanes per word (lane 0 low); K is zero-padded to 4 * G."""
    g = _padded(rows) & 0xFFFF
    return np.stack([g[..., 0] | (g[..., 2] << 16), g[..., 1] | (g[..., 3] << 16)],
                    axis=-1).astype(np.uint32)


def _byte_words(rows: np.ndarray) -> np.ndarray:
    """(R, K) int8 values → (R, G, 1) uint32: per group of four k one word, k0 in the low
    byte (SXTB16 of it gives (k0, k2) = A, SXTB16 ror 8 gives (k1, k3) = B)."""
    g = _padded(rows) & 0xFF
    word = g[..., 0] | (g[..., 1] << 8) | (g[..., 2] << 16) | (g[..., 3] << 24)
    return word[..., None].astype(np.uint32)


def _blocked(words: np.ndarray, block: int, pair_major: bool) -> np.ndarray:
    """(R, G, P) words → flat int32: blocks of `block` rows interleaved per group, as
    [A0, A1, .., B0, B1, ..] (pair_major) or [A0, B0, A1, B1, ..] (P = 2: A, B); the rows
    after the last whole block go in halving blocks (block 8: at most one each of 4, 2, 1),
    the order in which the kernels walk them."""
    r = words.shape[0]
    order = (1, 2, 0) if pair_major else (1, 0, 2)
    parts = []
    start = 0
    while block >= 1:
        while start + block <= r:
            parts.append(words[start:start + block].transpose(order).reshape(-1))
            start += block
        block //= 2
    return np.concatenate(parts).view(np.int32) if parts else np.zeros(0, np.int32)


def _pt_blocked(words: np.ndarray, block: int) -> np.ndarray:
    """_blocked for kiln_fully_connected_rows{8,6}_pt_s8: after the blocks of six come
    blocks of two (its asm loop), then a last single row; eight halve as _blocked's."""
    if block != 6:
        return _blocked(words, block, False)
    whole = words.shape[0] // 6 * 6
    return np.concatenate([_blocked(words[:whole], 6, False),
                           _blocked(words[whole:], 2, False)])


def _even_rows(rows: np.ndarray) -> np.ndarray:
    """(R, K) → (R rounded up to even, K): a zero row pairs a lone last one."""
    if rows.shape[0] % 2 == 0:
        return rows
    return np.concatenate([rows, np.zeros((1, rows.shape[1]), dtype=rows.dtype)])


def pairs8_ok(rows: np.ndarray) -> bool:
    """Whether (R, K) int8 filter rows pack as int8 pairs (conv_dsp.h, conv.h's
    kiln_conv2d_gemm_p8_s8): every second row d of a pair (c, d) has w_d - [w_c < 0] >= -128
    and 128 * sum |w_d| < 2^23, so its sum comes back exactly from raw - even."""
    r = _even_rows(rows.astype(np.int64))
    c, d = r[0::2], r[1::2]
    if r.size and (int(r.min()) < -128 or int(r.max()) > 127):
        return False
    return bool(((d - (c < 0)) >= -128).all() and
                (128 * np.abs(d).sum(axis=1) < (1 << 23)).all())


def _pair8_words(rows: np.ndarray) -> np.ndarray:
    """(R, K) int8 values → (ceil(R / 2), G, 2) uint32: per pair of rows (c, d) and
    group of four k, A = [c k0][h k0][c k2][h k2] and B the same for k1, k3 (low byte
    first), h = w_d - [w_c < 0], so each 16-bit half is w_c + 256 * w_d."""
    g = _padded(_even_rows(rows.astype(np.int64)))      # (R', G, 4)
    c, d = g[0::2], g[1::2]
    lo = c & 0xFF
    hi = (d - (c < 0)) & 0xFF
    a = lo[..., 0] | (hi[..., 0] << 8) | (lo[..., 2] << 16) | (hi[..., 2] << 24)
    b = lo[..., 1] | (hi[..., 1] << 8) | (lo[..., 3] << 16) | (hi[..., 3] << 24)
    return np.stack([a, b], axis=-1).astype(np.uint32)


def pack_fc_filter_p8(weights: np.ndarray) -> np.ndarray:
    """[units, depth] int8 → kiln_fully_connected_rows8_p8_s8's words: blocks of four
    row pairs interleaved per group, then each last pair on its own."""
    words = _pair8_words(weights)
    whole = weights.shape[0] // 8 * 4       # pairs in whole blocks of eight rows
    parts = [words[:whole].reshape(-1, 4, words.shape[1], 2).transpose(0, 2, 1, 3).reshape(-1),
             words[whole:].reshape(-1)]
    return np.concatenate(parts).view(np.int32)


def pack_conv2d_filter(weights: np.ndarray, oc_block: int = 2, kind: str = "s16") -> np.ndarray:
    """OHWI int8 → the packed int32 words of the gemm kernel with these knobs (each
    kernel row of KW * C values zero-padded to whole words): int16 pairs ("s16") or int8
    words ("s8") in blocks of `oc_block` channels."""
    o, kh, kw, c = weights.shape
    rows = np.zeros((o, kh, _round_up4(kw * c)), dtype=np.int64)
    rows[:, :, :kw * c] = weights.reshape(o, kh, kw * c)
    if kind == "p8":            # blocks of two pairs (four channels), then a last pair
        words = _pair8_words(rows.reshape(o, -1))
        whole = o // 4 * 2
        return np.concatenate([_blocked(words[:whole], 2, True),
                               _blocked(words[whole:], 1, True)])
    words = (_pair_words if kind == "s16" else _byte_words)(rows.reshape(o, -1))
    return _blocked(words, oc_block, True)


def pack_fc_filter(weights: np.ndarray, filter_offset: int, row_block: int = 4) -> np.ndarray:
    """[units, depth] int8 (+ filter_offset) → kiln_fully_connected_rows*_s8's words."""
    return _blocked(_pair_words(weights.astype(np.int64) + filter_offset), row_block, False)


def pack_dwconv_filter(weights: np.ndarray) -> np.ndarray:
    """1HWC int8 → the words of kiln_dwconv2d_3x3_s8 and kiln_dwconv2d_ch4_s8, C
    zero-padded to a multiple of 4: per block of four channels, per tap, the pairs
    [(c0, c2), (c1, c3)]."""
    words = _pair_words(weights.reshape(-1, weights.shape[3]))     # (taps, C / 4, 2)
    return words.transpose(1, 0, 2).reshape(-1).view(np.int32)


# --- checks shared by the four ops -----------------------------------------------------

def _check_common(ctx: LowerCtx, x: Tensor | None, w: Tensor | None, b: Tensor | None,
                  rank: int | None) -> str | None:
    y = ctx.output(0)
    if x is None or w is None:
        return "missing input or filter tensor"
    sixteen = x.dtype == "int16" or y.dtype == "int16"
    if sixteen and (x.dtype, y.dtype) != ("int16", "int16"):
        return f"16x8 layers need int16 input and output (got {x.dtype} -> {y.dtype})"
    if not sixteen and (x.dtype != "int8" or y.dtype != "int8"):
        return f"only int8 activations are supported (got {x.dtype} -> {y.dtype})"
    if w.dtype != "int8":
        return f"only int8 weights are supported (got {w.dtype})"
    if not w.is_const:
        return "the filter must be a constant tensor"
    bias_types = _BIAS16[ctx.op.type] if sixteen else ("int32",)
    if b is not None and (b.dtype not in bias_types or not b.is_const):
        return f"the bias must be a constant {' or '.join(bias_types)} tensor (got {b.dtype}" \
               f"{'' if b.is_const else ', not constant'})"
    for t in (x, y, w):
        if t.size == 0:
            return f"tensor {t.name} {list(t.shape)} is empty"
        if t.quant is None:
            return f"tensor {t.name} is not quantized"
    if x.quant.per_channel or y.quant.per_channel:
        return "per-channel quantized activations are not supported"
    if sixteen and (qparams(x)[1] != 0 or qparams(y)[1] != 0):
        return f"int16 activations must be symmetric (zero point 0; got {qparams(x)[1]} -> " \
               f"{qparams(y)[1]})"
    if rank is not None and (len(x.shape) != rank or len(y.shape) != rank or len(w.shape) != rank):
        return f"expected rank-{rank} input, filter and output, got {len(x.shape)}, " \
               f"{len(w.shape)}, {len(y.shape)}"
    act = ctx.op.options.get("fused_activation_function", "NONE")
    if act not in _ACTIVATIONS:
        return f"fused activation {act} is not supported"
    return None


def _check_spatial(ctx: LowerCtx, x: Tensor, w: Tensor, y: Tensor, dilated: bool) -> str | None:
    o = ctx.op.options
    if o.get("padding", "VALID") not in ("SAME", "VALID"):
        return f"padding {o.get('padding')} is not supported"
    keys = ("stride_h", "stride_w") + (("dilation_h_factor", "dilation_w_factor") if dilated else ())
    for key in keys:
        if int(o.get(key, 1)) < 1:
            return f"{key} = {o.get(key)} (must be >= 1)"
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]), dilated)
    want = tuple(out_size(g.padding_name, x.shape[1 + i], w.shape[1 + i], g.stride[i],
                          g.dilation[i]) for i in range(2))
    if (y.shape[1], y.shape[2]) != want:
        return f"output {y.shape[1]}x{y.shape[2]} does not match the {g.padding_name} " \
               f"output size {want[0]}x{want[1]}"
    if x.shape[0] != y.shape[0]:
        return f"batch {x.shape[0]} -> {y.shape[0]}"
    return None


def _check_scales(w: Tensor, channels: int) -> str | None:
    n = w.quant.scale.size
    if n != 1 and n != channels:
        return f"filter has {n} scales for {channels} output channels"
    return None


def _multipliers(x: Tensor, w: Tensor, y: Tensor, channels: int) -> tuple[np.ndarray, np.ndarray]:
    mult, shift = per_channel_multipliers(qparams(x)[0], w.quant.scale, qparams(y)[0], channels)
    return mult, shift


def _check_shifts(shift: np.ndarray, wide: bool = False) -> str | None:
    if wide and shift.size and int(shift.max()) > 7:
        return "effective output scale >= 128 (input_scale * filter_scale / output_scale); " \
               "the int64 requantization of 16x8 layers needs less"
    if shift.size and int(shift.max()) > 30:
        return "effective output scale >= 2^30 (input_scale * filter_scale / output_scale)"
    return None


def _check_accumulator(bias: np.ndarray, abs_weight_sums: np.ndarray, what: str,
                       mode: str = "int8") -> str | None:
    """int8: worst case |bias| + 256 * sum|w| per channel must fit int32: this bounds TFLM's
    accumulator (|input + input_offset| <= 255) and kiln's folded one (|input| <= 128,
    |input_offset * sum w| <= 128 * sum|w|). 16x8 "wide" (int64 bias): |bias| + 32768 *
    sum|w| < 2^47, the input range of TFLM's int64 requantization. 16x8 "narrow": TFLM's
    int32 accumulator wraps and so do kiln's (crt/kernels/conv.h): no bound."""
    if mode == "narrow":
        return None
    scale, limit, kind = (32768, (1 << 47) - 1, "int64") if mode == "wide" else \
        (256, _INT32_MAX, "int32")
    worst = [abs(int(v)) + scale * int(s) for v, s in zip(bias.tolist(), abs_weight_sums.tolist())]
    if worst and max(worst) > limit:
        return f"{what}: the {kind} accumulator could overflow (worst case {max(worst)})"
    return None


def _mode(ctx: LowerCtx, x: Tensor, b: Tensor | None) -> str:
    """The arithmetic of a layer: "int8", or of a 16x8 one as TFLM picks it by the bias
    type: "narrow" (an int32 accumulator: a CONV_2D or FULLY_CONNECTED with an int32
    bias) or "wide" (int64, also without a bias; see crt/kernels/conv.h)."""
    if x.dtype != "int16":
        return "int8"
    if ctx.op.type in ("CONV_2D", "FULLY_CONNECTED") and b is not None and b.dtype == "int32":
        return "narrow"
    return "wide"


def _bias_values(b: Tensor | None, n: int) -> np.ndarray:
    if b is None:
        return np.zeros(n, dtype=np.int64)
    return b.data.reshape(-1).astype(np.int64)


def _act_name(ctx: LowerCtx) -> str:
    act = ctx.op.options.get("fused_activation_function", "NONE")
    return "" if act == "NONE" else f", {act}"


def _conv_params_c(type_name: str, g: ConvGeometry, x: Tensor, y: Tensor,
                   act: tuple[int, int], depth_multiplier: int | None = None) -> str:
    fields = [f".stride = {{{g.stride[0]}, {g.stride[1]}}}, "
              f".padding = {{{g.padding[0]}, {g.padding[1]}}}, "
              f".dilation = {{{g.dilation[0]}, {g.dilation[1]}}},",
              f".input_offset = {-qparams(x)[1]}, .output_offset = {qparams(y)[1]}, "
              f".activation = {{{act[0]}, {act[1]}}},"]
    if depth_multiplier is None:
        body = [f"    {f}" for f in fields]
    else:
        body = ["    .conv = {"] + [f"        {f}" for f in fields] + \
               ["    },", f"    .depth_multiplier = {depth_multiplier},"]
    return "\n".join([f"static const {type_name} params = {{"] + body + ["};"])


def _call(kernel: str, *arg_lines: str) -> str:
    """`return kernel(...);` with one (dims, data) pair per line, aligned on the paren."""
    head = f"return {kernel}("
    pad = " " * len(head)
    return head + f",\n{pad}".join(arg_lines) + ");"


def _quant_c(ctx: LowerCtx, mult: np.ndarray, shift: np.ndarray) -> str:
    m = ctx.const("multiplier", mult, "int32_t", "per-channel requantization multipliers")
    s = ctx.const("shift", shift, "int32_t", "per-channel requantization shifts")
    return f"static const kiln_per_channel_requant_t quant = {{{m}, {s}}};"


# --- CONV_2D ---------------------------------------------------------------------------

def _conv2d_check(ctx: LowerCtx) -> str | None:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    reason = _check_common(ctx, x, w, b, rank=4)
    if reason:
        return reason
    out_c = y.shape[3]
    if w.shape[0] != out_c:
        return f"filter has {w.shape[0]} output channels, output {out_c}"
    if x.shape[3] % w.shape[3] != 0 or out_c % (x.shape[3] // w.shape[3]) != 0:
        return f"input channels {x.shape[3]} are not a whole number of groups of {w.shape[3]} " \
               f"dividing {out_c} output channels"
    if b is not None and b.size != out_c:
        return f"bias has {b.size} values for {out_c} output channels"
    reason = _check_spatial(ctx, x, w, y, dilated=True) or _check_scales(w, out_c)
    if reason:
        return reason
    mode = _mode(ctx, x, b)
    reason = _check_shifts(_multipliers(x, w, y, out_c)[1], mode == "wide")
    if reason:
        return reason
    abs_sums = np.abs(w.data.astype(np.int64)).reshape(out_c, -1).sum(axis=1)
    return _check_accumulator(_bias_values(b, out_c), abs_sums, "CONV_2D", mode)


def _conv_shape(x: Tensor, w: Tensor, y: Tensor, g: ConvGeometry, fast: bool,
                act: tuple[int, int], depth_multiplier: int = 1,
                pairs8: bool = True) -> LayerShape:
    return LayerShape(input=tuple(x.shape), filter=tuple(w.shape),  # type: ignore[arg-type]
                      output=tuple(y.shape), padding=g.padding,  # type: ignore[arg-type]
                      dilation=g.dilation, depth_multiplier=depth_multiplier,
                      requant_fast=fast, pairs8=pairs8, stride=g.stride,
                      clamped=act != (-128, 127),
                      relu_floor=act == (-128, 127) and int(qparams(y)[1]) == -128)


def _knobs_c(v: Variant) -> str:
    return ", ".join(f"{k} {val}" for k, val in v.knobs.items() if k != "variant")


@lowering("CONV_2D", check=_conv2d_check)
def lower_conv2d(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    if x.dtype == "int16":
        return _lower_conv2d_s16(ctx)
    out_c = y.shape[3]
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    act = fused_range(ctx, y)
    mult, shift = _multipliers(x, w, y, out_c)
    input_offset = -qparams(x)[1]
    # Folded bias: bias + input_offset * sum of the filter row (padding reads as the zero
    # point in the kernel, so this holds at the borders).
    weights = w.data.astype(np.int64).reshape(out_c, -1)
    folded = _bias_values(b, out_c) + input_offset * weights.sum(axis=1)
    abs_sums = np.abs(weights).sum(axis=1)
    shape = _conv_shape(x, w, y, g, _live_shifts_fast(shift, abs_sums), act,
                        pairs8=pairs8_ok(weights))
    v = conv2d_variant(shape, ctx.target, ctx.knobs)
    if v.knobs["variant"] == "mve":         # conv_mve.py: exact for any shift
        body = conv2d_mve_body(ctx, _conv_params_c("kiln_conv_params_t", g, x, y, act), mult,
                               shift, folded, v, _call)
        return LayerCode(kernel=v.kernel, body=body, scratch_bytes=v.scratch,
                         macs=_conv2d_macs(ctx), summary=_conv2d_summary(ctx, g, v),
                         knobs=v.knobs, shape=shape)
    kernel, scratch = v.kernel, v.scratch
    gemm = v.knobs["variant"] == "gemm"
    if gemm:
        table, folded = requant_fast(mult, shift, folded, abs_sums)
        kind = v.knobs["weights"]
        quant = (_requant_packed_c if kind == "p8" else _requant_fast_c)(ctx, table)
        packed = pack_conv2d_filter(w.data, v.knobs["oc_block"], kind)
        how = {"s16": "int16 pairs", "s8": "int8", "p8": "int8 channel pairs"}[kind]
        filter_name = ctx.const("filter", packed, "int32_t",
                                f"{w.name} packed as {how} for {kernel} (conv.h)")
    else:
        quant = _quant_c(ctx, mult, shift)
        filter_name = ctx.ptr(w)
    bias_name = ctx.const("bias", folded.astype(np.int32), "int32_t",
                          "bias + input_offset * sum(filter row)")
    lines = [
        _conv_params_c("kiln_conv_params_t", g, x, y, act),
        quant,
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
    ]
    args = ["&params, quant" if gemm and kind != "p8" else "&params, &quant",
            f"&input_dims, {ctx.ptr(x)}",
            f"&filter_dims, {filter_name}, {bias_name}", f"&output_dims, {ctx.ptr(y)}"]
    if scratch:
        lines.append(f"const kiln_context_t ctx = {{scratch, {scratch}}};")
        args[0] = "&ctx, " + args[0]
    lines.append(_call(kernel, *args))
    return LayerCode(kernel=kernel, body="\n".join(lines), scratch_bytes=scratch,
                     macs=_conv2d_macs(ctx), summary=_conv2d_summary(ctx, g, v), knobs=v.knobs,
                     shape=shape)


# Lean entry points: a kernel's twin for the layers the first item says, with the same
# results and less code (conv.h, inplace.h): the int8-pair gemm for an activation of the
# full int8 range (no clamping pixel loop, about 1.2 KB on a Cortex-M4), px2 for a RELU
# at the int8 range over a multiple of four channels (only its assembly, about 600 B).
# Each entry point the layer may call (the kernel, its banded twins) -> its lean twin.
def _relu_whole_blocks(s: LayerShape) -> bool:
    return s.relu_floor and s.output[3] % 4 == 0


LEAN_ENTRIES = {
    "kiln_conv2d_gemm_p8_s8": (
        lambda s: not s.clamped,
        {"kiln_conv2d_gemm_p8_s8": "kiln_conv2d_gemm_p8_full_s8",
         "kiln_conv2d_gemm_p8_banded_s8": "kiln_conv2d_gemm_p8_full_banded_s8",
         "kiln_conv2d_gemm_p8_flat_banded_s8": "kiln_conv2d_gemm_p8_full_flat_banded_s8"}),
    "kiln_dwconv2d_3x3_px2_s8": (
        _relu_whole_blocks,
        {"kiln_dwconv2d_3x3_px2_s8": "kiln_dwconv2d_3x3_px2_relu_s8"}),
    "kiln_dwconv2d_3x3_px2v_s8": (
        _relu_whole_blocks,
        {"kiln_dwconv2d_3x3_px2v_s8": "kiln_dwconv2d_3x3_px2v_relu_s8",
         "kiln_dwconv2d_3x3_px2v_banded_s8": "kiln_dwconv2d_3x3_px2v_relu_banded_s8"}),
}


def lean_entries(layers: list) -> list:
    """The emitted layers (codegen generate) with every layer of a kernel in LEAN_ENTRIES
    calling its lean twin when all that kernel's layers qualify: the firmware then
    carries only the lean code. One layer that does not keep them all on the general
    entry point, which serves both, rather than linking two. `kernel` stays the variant
    (kiln.json, tuning); `called` names the entry point."""
    out = list(layers)
    for kernel, (qualifies, twins) in LEAN_ENTRIES.items():
        mine = [i for i, e in enumerate(layers) if e.code.kernel == kernel]
        if any(layers[i].code.shape is None or not qualifies(layers[i].code.shape)
               or (layers[i].code.called or kernel) not in twins for i in mine):
            continue
        for i in mine:
            code = layers[i].code
            called = code.called or code.kernel
            lean = twins[called]
            old, new = f"return {called}(", f"return {lean}("
            assert code.body.count(old) == 1, code.body
            body = code.body.replace(old, new).replace("\n" + " " * len(old),
                                                       "\n" + " " * len(new))
            out[i] = replace(layers[i], code=replace(code, body=body, called=lean))
    return out


def _conv2d_macs(ctx: LowerCtx) -> int:
    w = ctx.input(1)
    return int(np.prod(ctx.output(0).shape)) * w.shape[1] * w.shape[2] * w.shape[3]


def _conv2d_summary(ctx: LowerCtx, g: ConvGeometry, v: Variant) -> str:
    x, w = ctx.input(0), ctx.input(1)
    groups = x.shape[3] // w.shape[3]
    knobs = _knobs_c(v)
    return (f"{w.shape[1]}x{w.shape[2]} filter, stride {g.stride[0]}x{g.stride[1]}, "
            f"dilation {g.dilation[0]}x{g.dilation[1]}, {g.padding_name} padding "
            f"(top {g.padding[0]}, left {g.padding[1]})"
            f"{f', {groups} groups' if groups > 1 else ''}{_act_name(ctx)}"
            f"{f'; {knobs}' if knobs else ''}")


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------

def _dwconv_check(ctx: LowerCtx) -> str | None:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    reason = _check_common(ctx, x, w, b, rank=4)
    if reason:
        return reason
    mult = int(ctx.op.options.get("depth_multiplier", 1))
    out_c = y.shape[3]
    if w.shape[0] != 1 or w.shape[3] != out_c:
        return f"filter shape {list(w.shape)} does not match {out_c} output channels"
    if mult < 1 or out_c != x.shape[3] * mult:
        return f"output channels {out_c} != input channels {x.shape[3]} * depth_multiplier {mult}"
    if b is not None and b.size != out_c:
        return f"bias has {b.size} values for {out_c} output channels"
    reason = _check_spatial(ctx, x, w, y, dilated=True) or _check_scales(w, out_c)
    if reason:
        return reason
    mode = _mode(ctx, x, b)
    reason = _check_shifts(_multipliers(x, w, y, out_c)[1], mode == "wide")
    if reason:
        return reason
    abs_sums = np.abs(w.data.astype(np.int64)).reshape(-1, out_c).sum(axis=0)
    return _check_accumulator(_bias_values(b, out_c), abs_sums, "DEPTHWISE_CONV_2D", mode)


@lowering("DEPTHWISE_CONV_2D", check=_dwconv_check)
def lower_dwconv2d(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    if x.dtype == "int16":
        return _lower_dwconv2d_s16(ctx)
    out_c = y.shape[3]
    mult_opt = int(ctx.op.options.get("depth_multiplier", 1))
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    act = fused_range(ctx, y)
    mult, shift = _multipliers(x, w, y, out_c)
    taps = w.data.astype(np.int64).reshape(-1, out_c)
    abs_sums = np.abs(taps).sum(axis=0)
    shape = _conv_shape(x, w, y, g, _live_shifts_fast(shift, abs_sums), act, mult_opt)
    v = dwconv2d_variant(shape, ctx.target, ctx.knobs)
    if v.knobs["variant"] == "mve":         # conv_mve.py: exact for any shift
        params_c = _conv_params_c("kiln_dwconv_params_t", g, x, y, act, depth_multiplier=mult_opt)
        body = dwconv2d_mve_body(ctx, params_c, mult, shift, v.scratch, _call)
        return LayerCode(kernel=v.kernel, body=body, scratch_bytes=v.scratch,
                         macs=_dwconv2d_macs(ctx), summary=_dwconv2d_summary(ctx, g, v, mult_opt),
                         knobs=v.knobs, shape=shape)
    if v.knobs["variant"] == "gemm":
        return _lower_dwconv2d_gemm(ctx, g, act, shape, v)
    kernel = v.kernel
    simd = v.knobs["variant"] != "generic"
    args = ["&params, quant" if simd else "&params, &quant",
            f"&input_dims, {ctx.ptr(x)}", "", f"&output_dims, {ctx.ptr(y)}"]
    planes = v.knobs["variant"] in ("3x3_planes", "3x3_tiny")
    if planes:
        # One record a channel (conv.h kiln_dw_planes_channel_t), the kernel LDMs it.
        table, unfolded = requant_fast(mult, shift, _bias_values(b, out_c), abs_sums)
        records = planes_channels(w.data, unfolded, table, int(qparams(y)[1]))
        name = ctx.const("channels", records.view(np.int32).reshape(-1), "int32_t",
                         "kiln_dw_planes_channel_t per channel: weight pairs, bias, "
                         "requantization")
        args[0] = ("&ctx, &params, (const kiln_dw_planes_channel_t *)" + name)
        args[2] = "&filter_dims"
        quant = ""
    elif simd and v.knobs["variant"] in ("3x3_w8", "3x3_px2", "3x3_px2v", "3x3_s2ring"):
        # The model's int8 filter as it is; the kernel folds the bias itself (conv.h).
        table, unfolded = requant_fast(mult, shift, _bias_values(b, out_c), abs_sums)
        # The kernels derive their constants once per block of channels (w8's edge
        # pixels per output, as from the wider table): five bytes a channel, not twelve.
        # The pixel-pair kernels take the biases as int16 where every one fits (conv.h).
        what = "bias (dead channels: their constant, see requant_fast)"
        if v.knobs["variant"] in ("3x3_px2", "3x3_px2v") and _fits_int16(unfolded):
            bias16 = ctx.const("bias", unfolded.astype(np.int16), "int16_t", what)
            quant, bias_name = _requant_packed_c(ctx, table, bias16), "NULL"
        else:
            quant = _requant_packed_c(ctx, table)
            bias_name = ctx.const("bias", unfolded.astype(np.int32), "int32_t", what)
        args[0] = "&ctx, &params, &quant"
        filter_name = ctx.ptr(w)
    elif simd:
        # Padding reads as the zero point here, so the bias folds as in CONV_2D.
        folded = _bias_values(b, out_c) - qparams(x)[1] * taps.sum(axis=0)
        table, folded = requant_fast(mult, shift, folded, abs_sums)
        quant = _requant_fast_c(ctx, table)
        bias_name = ctx.const("bias", folded.astype(np.int32), "int32_t",
                              "bias + input_offset * sum(channel taps)")
        filter_name = ctx.const("filter", pack_dwconv_filter(w.data), "int32_t",
                                f"{w.name} packed as int16 pairs for {kernel} (conv.h)")
        args[0] = "&ctx, " + args[0]
    else:
        quant = _quant_c(ctx, mult, shift)
        bias_name = ctx.ptr(b) if b is not None else "NULL"
        filter_name = ctx.ptr(w)
    if not planes:
        args[2] = f"&filter_dims, {filter_name}, {bias_name}"
    lines = [
        _conv_params_c("kiln_dwconv_params_t", g, x, y, act,
                       depth_multiplier=mult_opt),
        *([quant] if quant else []),
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
    ]
    if v.scratch:
        lines.append(f"const kiln_context_t ctx = {{scratch, {v.scratch}}};")
    lines.append(_call(kernel, *args))
    return LayerCode(kernel=kernel, body="\n".join(lines), scratch_bytes=v.scratch,
                     macs=_dwconv2d_macs(ctx), summary=_dwconv2d_summary(ctx, g, v, mult_opt),
                     knobs=v.knobs, shape=shape)


def planes_channels(weights: np.ndarray, bias: np.ndarray, table: np.ndarray,
                    output_zero_point: int) -> np.ndarray:
    """1HWC int8 filter, bias and requant_fast's table → kiln_dw_planes_channel_t per
    channel as uint32 [C, 9]: per filter row (w0, w1) and (w1, w2) (int16 lanes, lane 0
    low), the bias, multiplier << 1, right shift | (1 + 2 * zero point) << 8."""
    w = weights.reshape(3, 3, -1).astype(np.int64) & 0xFFFF         # [row, tap, C]
    taps = [pair for r in range(3)
            for pair in (w[r, 0] | (w[r, 1] << 16), w[r, 1] | (w[r, 2] << 16))]
    k = 1 + 2 * output_zero_point
    rsk = table[:, 2].astype(np.int64) + (k << 8)
    columns = [*taps, bias.astype(np.int64), table[:, 0].astype(np.int64) << 1, rsk]
    return (np.stack(columns, axis=1) & 0xFFFFFFFF).astype(np.uint32)


def _dwconv2d_macs(ctx: LowerCtx) -> int:
    w = ctx.input(1)
    return int(np.prod(ctx.output(0).shape)) * w.shape[1] * w.shape[2]


def _dwconv2d_summary(ctx: LowerCtx, g: ConvGeometry, v: Variant, mult_opt: int) -> str:
    w = ctx.input(1)
    knobs = _knobs_c(v)
    return (f"{w.shape[1]}x{w.shape[2]} filter, depth multiplier {mult_opt}, "
            f"stride {g.stride[0]}x{g.stride[1]}, dilation {g.dilation[0]}x{g.dilation[1]}, "
            f"{g.padding_name} padding (top {g.padding[0]}, left {g.padding[1]})"
            f"{_act_name(ctx)}{f'; {knobs}' if knobs else ''}")


def _lower_dwconv2d_gemm(ctx: LowerCtx, g: ConvGeometry, act: tuple[int, int],
                         shape: LayerShape, v: Variant) -> LayerCode:
    """A depthwise layer with one input channel as the CONV_2D it equals: output channel
    oc convolves the input with filter[0, :, :, oc], so the OHWI filter is the 1HWC one
    transposed (packed for the gemm kernel of the knobs), and the bias folds and the
    requantization runs per output channel exactly as CONV_2D's."""
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    out_c = y.shape[3]
    mult, shift = _multipliers(x, w, y, out_c)
    ohwi = w.data.transpose(3, 1, 2, 0)
    weights = ohwi.astype(np.int64).reshape(out_c, -1)
    folded = _bias_values(b, out_c) - qparams(x)[1] * weights.sum(axis=1)
    table, folded = requant_fast(mult, shift, folded, np.abs(weights).sum(axis=1))
    kind = v.knobs["weights"]
    filter_name = ctx.const("filter", pack_conv2d_filter(ohwi, v.knobs["oc_block"], kind),
                            "int32_t", f"{w.name} transposed to OHWI, packed as "
                            f"{'int16 pairs' if kind == 's16' else 'int8'} for {v.kernel} "
                            "(conv.h)")
    bias_name = ctx.const("bias", folded.astype(np.int32), "int32_t",
                          "bias + input_offset * sum(channel taps)")
    lines = [
        _conv_params_c("kiln_conv_params_t", g, x, y, act),
        _requant_fast_c(ctx, table),
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(ohwi.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
        f"const kiln_context_t ctx = {{scratch, {v.scratch}}};",
        _call(v.kernel, "&ctx, &params, quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {filter_name}, {bias_name}", f"&output_dims, {ctx.ptr(y)}"),
    ]
    summary = (f"{w.shape[1]}x{w.shape[2]} filter, depth multiplier {out_c}, one input "
               f"channel: as CONV_2D, stride {g.stride[0]}x{g.stride[1]}, dilation "
               f"{g.dilation[0]}x{g.dilation[1]}, {g.padding_name} padding (top {g.padding[0]}, "
               f"left {g.padding[1]}){_act_name(ctx)}; {_knobs_c(v)}")
    return LayerCode(kernel=v.kernel, body="\n".join(lines), scratch_bytes=v.scratch,
                     macs=int(np.prod(y.shape)) * w.shape[1] * w.shape[2], summary=summary,
                     knobs=v.knobs, shape=shape)


# --- FULLY_CONNECTED -------------------------------------------------------------------

@dataclass
class _FcShape:
    batches: int
    depth: int
    units: int


def _fc_shape(x: Tensor, w: Tensor) -> _FcShape:
    depth = int(w.shape[-1])
    return _FcShape(batches=x.size // depth if depth else 0, depth=depth, units=int(w.shape[0]))


def _fc_quant(x: Tensor, w: Tensor, y: Tensor, units: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(multipliers, shifts, filter_offset) as TFLM's CalculateOpDataFullyConnected."""
    if w.quant.per_channel:
        mult, shift = _multipliers(x, w, y, units)
        return mult, shift, 0       # TFLM's per-channel kernel ignores the zero point
    x_scale, w_scale, y_scale = qparams(x)[0], qparams(w)[0], qparams(y)[0]
    # GetQuantizedConvolutionMultipler: the scales' product taken in double, as the
    # tflite-micro kiln is checked against does (a float32 product rounds apart for some
    # scales: tests/test_ops_lstm.py::test_fc_multiplier_is_tflms_double_product).
    real = float(np.float32(x_scale)) * float(np.float32(w_scale)) / float(np.float32(y_scale))
    m, s = quantize_multiplier(real)
    return (np.full(units, m, dtype=np.int32), np.full(units, s, dtype=np.int32),
            -qparams(w)[1])


def _fc_check(ctx: LowerCtx) -> str | None:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    reason = _check_common(ctx, x, w, b, rank=None)
    if reason:
        return reason
    o = ctx.op.options
    if int(o.get("weights_format", 0)) != 0:
        return "shuffled weights (weights_format SHUFFLED4x16INT8) are not supported"
    if len(w.shape) != 2:
        return f"expected a 2-D filter, got {list(w.shape)}"
    s = _fc_shape(x, w)
    if s.depth == 0 or x.size % s.depth != 0:
        return f"input of {x.size} values is not a whole number of rows of {s.depth}"
    if y.shape[-1] != s.units or y.size != s.batches * s.units:
        return f"output {list(y.shape)} != {s.batches} rows of {s.units} units"
    if w.quant.per_channel:
        if w.quant.scale.size != s.units:
            return f"filter has {w.quant.scale.size} scales for {s.units} units"
    if b is not None and b.size != s.units:
        return f"bias has {b.size} values for {s.units} units"
    mult, shift, w_off = _fc_quant(x, w, y, s.units)
    mode = _mode(ctx, x, b)
    reason = _check_shifts(shift, mode == "wide")
    if reason:
        return reason
    if mode != "int8":
        abs_sums = np.abs(w.data.astype(np.int64) + w_off).sum(axis=1)
        return _check_accumulator(_bias_values(b, s.units), abs_sums, "FULLY_CONNECTED", mode)
    abs_sums = np.abs(w.data.astype(np.int64) + w_off).sum(axis=1) + \
        np.abs(w.data.astype(np.int64)).sum(axis=1) + abs(w_off) * s.depth
    return _check_accumulator(_bias_values(b, s.units), abs_sums, "FULLY_CONNECTED")


@lowering("FULLY_CONNECTED", check=_fc_check)
def lower_fully_connected(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    if x.dtype == "int16":
        return _lower_fully_connected_s16(ctx)
    s = _fc_shape(x, w)
    act = fused_range(ctx, y)
    mult, shift, w_off = _fc_quant(x, w, y, s.units)
    input_offset = -qparams(x)[1]
    weights = w.data.astype(np.int64)
    folded = _bias_values(b, s.units) + input_offset * (weights + w_off).sum(axis=1)
    abs_sums = np.abs(weights + w_off).sum(axis=1)
    pairs8 = w_off == 0 and pairs8_ok(weights)
    odd_sums = np.abs(_even_rows(weights)[1::2]).sum(axis=1) if pairs8 else None
    shape = LayerShape(input=(s.batches, 1, 1, s.depth), filter=(s.units, 1, 1, s.depth),
                       output=(s.batches, 1, 1, s.units),
                       requant_fast=_live_shifts_fast(shift, abs_sums),
                       pairs8=pairs8,
                       per_tensor=fc_per_tensor_ok(mult, shift, folded, abs_sums, odd_sums),
                       clamped=act != (-128, 127))
    v = fully_connected_variant(shape, ctx.target, ctx.knobs)
    if v.knobs["variant"] == "mve":         # conv_mve.py: exact for any shift
        params_c = "\n".join(_fc_params_c(input_offset, w_off, y, act))
        body = fully_connected_mve_body(ctx, params_c, mult, shift, folded,
                                        (s.batches, s.depth, s.units), _call)
        return LayerCode(kernel=v.kernel, body=body, macs=s.batches * s.depth * s.units,
                         summary=_fc_summary(ctx, s, v), knobs=v.knobs, shape=shape)
    if v.knobs["variant"] == "gemm":
        return _lower_fully_connected_gemm(ctx, s, act, mult, shift, folded, abs_sums, shape, v)
    kernel = v.kernel
    rows = v.knobs["variant"] == "rows"
    pt = kernel == _FC_P8_PT or kernel in _FC_PT.values()
    p8 = v.knobs.get("weights") == "p8"
    if pt:
        # one multiplier and shift (fc_per_tensor_ok: shift <= -2, so requant_fast's
        # table is TFLite's), the bias as accumulator starts
        table, _ = requant_fast(mult[:1], shift[:1], folded[:1], abs_sums[:1])
        quant = _requant_packed_c(ctx, table)
        if p8:
            packed = pack_fc_filter_p8(w.data)
            how = "as int8 row pairs"
            folded = pt_bias_p8(folded)
        else:
            packed = _pt_blocked(_pair_words(2 * (weights + w_off)), v.knobs["row_block"])
            how = "+ filter_offset, doubled, packed as int16 pairs"
            folded = 2 * folded
        filter_name = ctx.const("filter", packed, "int32_t", f"{w.name} {how} for {kernel} "
                                "(conv.h)")
        param_w_off = 0
    elif rows:
        table, folded = requant_fast(mult, shift, folded, abs_sums)
        quant = (_requant_packed_c if p8 else _requant_fast_c)(ctx, table)
        if p8:
            packed = pack_fc_filter_p8(w.data)
            how = "as int8 row pairs"
        else:
            packed = pack_fc_filter(w.data, w_off, v.knobs["row_block"])
            how = "+ filter_offset packed as int16 pairs"
        filter_name = ctx.const("filter", packed, "int32_t", f"{w.name} {how} for {kernel} "
                                "(conv.h)")
        param_w_off = 0         # in the packed filter
    else:
        quant = _quant_c(ctx, mult, shift)
        filter_name = ctx.ptr(w)
        param_w_off = w_off
    bias_name = ctx.const("bias", folded.astype(np.int32), "int32_t",
                          "bias + input_offset * sum(filter row + filter_offset)" +
                          (", as accumulator starts (conv.h)" if pt else ""))
    lines = _fc_params_c(input_offset, param_w_off, y, act) + [
        quant,
        f"static const kiln_dims_t input_dims = {{{s.batches}, 1, 1, {s.depth}}};",
        f"static const kiln_dims_t filter_dims = {{{s.units}, 1, 1, {s.depth}}};",
        f"static const kiln_dims_t output_dims = {{{s.batches}, 1, 1, {s.units}}};",
    ]
    args = ["&params, quant" if rows and not p8 and not pt else "&params, &quant",
            f"&input_dims, {ctx.ptr(x)}",
            f"&filter_dims, {filter_name}, {bias_name}", f"&output_dims, {ctx.ptr(y)}"]
    if v.scratch:
        lines.append(f"const kiln_context_t ctx = {{scratch, {v.scratch}}};")
        args[0] = "&ctx, " + args[0]
    lines.append(_call(kernel, *args))
    return LayerCode(kernel=kernel, body="\n".join(lines), scratch_bytes=v.scratch,
                     macs=s.batches * s.depth * s.units, summary=_fc_summary(ctx, s, v),
                     knobs=v.knobs, shape=shape)


def _lower_fully_connected_gemm(ctx: LowerCtx, s: _FcShape, act: tuple[int, int],
                                mult: np.ndarray, shift: np.ndarray, folded: np.ndarray,
                                abs_sums: np.ndarray, shape: LayerShape,
                                v: Variant) -> LayerCode:
    """A FULLY_CONNECTED as the CONV_2D it equals: its rows as a column of pixels (1, B, 1,
    depth), its filter (units, 1, 1, depth) with a zero filter offset (the p8 candidates
    require it), the folded bias and the requantization per unit exactly as CONV_2D's."""
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    table, folded = requant_fast(mult, shift, folded, abs_sums)
    ohwi = w.data.reshape(s.units, 1, 1, s.depth)
    filter_name = ctx.const("filter", pack_conv2d_filter(ohwi, v.knobs["oc_block"], "p8"),
                            "int32_t", f"{w.name} as a 1x1 filter, packed as int8 channel "
                            f"pairs for {v.kernel} (conv.h)")
    bias_name = ctx.const("bias", folded.astype(np.int32), "int32_t",
                          "bias + input_offset * sum(filter row)")
    lines = [
        "static const kiln_conv_params_t params = {",
        "    .stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1},",
        f"    .input_offset = {-qparams(x)[1]}, .output_offset = {qparams(y)[1]}, "
        f".activation = {{{act[0]}, {act[1]}}},",
        "};",
        _requant_packed_c(ctx, table),
        f"static const kiln_dims_t input_dims = {{1, {s.batches}, 1, {s.depth}}};",
        f"static const kiln_dims_t filter_dims = {{{s.units}, 1, 1, {s.depth}}};",
        f"static const kiln_dims_t output_dims = {{1, {s.batches}, 1, {s.units}}};",
        f"const kiln_context_t ctx = {{scratch, {v.scratch}}};",
        _call(v.kernel, "&ctx, &params, &quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {filter_name}, {bias_name}", f"&output_dims, {ctx.ptr(y)}"),
    ]
    return LayerCode(kernel=v.kernel, body="\n".join(lines), scratch_bytes=v.scratch,
                     macs=s.batches * s.depth * s.units,
                     summary=_fc_summary(ctx, s, v) + " (as a 1x1 CONV_2D)",
                     knobs=v.knobs, shape=shape)


def _fc_params_c(input_offset: int, filter_offset: int, y: Tensor,
                 act: tuple[int, int]) -> list[str]:
    return ["static const kiln_fc_params_t params = {",
            f"    .input_offset = {input_offset}, .filter_offset = {filter_offset}, "
            f".output_offset = {qparams(y)[1]},",
            f"    .activation = {{{act[0]}, {act[1]}}},",
            "};"]


def _fc_summary(ctx: LowerCtx, s: _FcShape, v: Variant) -> str:
    kind = "per-channel" if ctx.input(1).quant.per_channel else "per-tensor"
    knobs = _knobs_c(v)
    return (f"{s.batches} x {s.depth} -> {s.units} units, {kind} weights{_act_name(ctx)}"
            f"{f'; {knobs}' if knobs else ''}")


# --- TRANSPOSE_CONV --------------------------------------------------------------------

def _tconv_tensors(ctx: LowerCtx) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor]:
    # inputs: output_shape, weights (OHWI), input, optional bias
    return ctx.input(2), ctx.input(1), ctx.input(3), ctx.output(0)


def _tconv_geometry(ctx: LowerCtx, y: Tensor, w: Tensor) -> ConvGeometry:
    # TFLM pads as if convolving the output down to the input (dilation 1).
    return _geometry(ctx, (y.shape[1], y.shape[2]), (w.shape[1], w.shape[2]), dilated=False)


def _tconv_check(ctx: LowerCtx) -> str | None:
    x, w, b, y = _tconv_tensors(ctx)
    reason = _check_common(ctx, x, w, b, rank=4)
    if reason:
        return reason
    o = ctx.op.options
    if o.get("padding", "VALID") not in ("SAME", "VALID"):
        return f"padding {o.get('padding')} is not supported"
    if int(o.get("stride_h", 1)) < 1 or int(o.get("stride_w", 1)) < 1:
        return "strides must be >= 1"
    out_c = y.shape[3]
    if w.shape[0] != out_c or w.shape[3] != x.shape[3]:
        return f"filter {list(w.shape)} does not match input {list(x.shape)} and " \
               f"output {list(y.shape)}"
    if x.shape[0] != y.shape[0]:
        return f"batch {x.shape[0]} -> {y.shape[0]}"
    shape_t = ctx.input(0)
    if shape_t is not None and shape_t.is_const and \
            [int(v) for v in shape_t.data.reshape(-1)] != list(y.shape):
        return f"output_shape {shape_t.data.tolist()} != output tensor {list(y.shape)}"
    if b is not None and b.size != out_c:
        return f"bias has {b.size} values for {out_c} output channels"
    mode = _mode(ctx, x, b)
    reason = _check_scales(w, out_c) or \
        _check_shifts(_multipliers(x, w, y, out_c)[1], mode == "wide")
    if reason:
        return reason
    # Taps reaching one output: at most ceil(KH / stride_h) * ceil(KW / stride_w).
    sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
    taps = -(-w.shape[1] // sh) * -(-w.shape[2] // sw)
    worst_row = np.abs(w.data.astype(np.int64)).reshape(out_c, -1).max(axis=1) * x.shape[3] * taps
    return _check_accumulator(_bias_values(b, out_c), worst_row, "TRANSPOSE_CONV", mode)


@extremes("TRANSPOSE_CONV")
def _tconv_extremes(ctx: LowerCtx) -> list[Extreme]:
    """transpose_conv.c: t = out + padding, taps k stepping by the stride up to the
    filter size, input index (t - k) / stride."""
    x, w, b, y = _tconv_tensors(ctx)
    g = _tconv_geometry(ctx, y, w)
    return [e for i, axis in enumerate("hw") for e in (
        (f"out_{axis} + padding_{axis}", y.shape[1 + i] + g.padding[i]),
        (f"filter_{axis} + stride_{axis}", w.shape[1 + i] + g.stride[i]),
        (f"(out_{axis} + padding_{axis}) / stride_{axis} + in_{axis}",
         (y.shape[1 + i] + g.padding[i]) // g.stride[i] + x.shape[1 + i]))]


@lowering("TRANSPOSE_CONV", check=_tconv_check)
def lower_transpose_conv(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = _tconv_tensors(ctx)
    if x.dtype == "int16":
        return _lower_transpose_conv_s16(ctx)
    out_c = y.shape[3]
    g = _tconv_geometry(ctx, y, w)
    act = fused_range(ctx, y)
    mult, shift = _multipliers(x, w, y, out_c)
    kernel = "kiln_transpose_conv_s8"
    lines = [
        _conv_params_c("kiln_conv_params_t", g, x, y, act),
        _quant_c(ctx, mult, shift),
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
        _call(kernel, "&params, &quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {ctx.ptr(w)}, {ctx.ptr(b) if b is not None else 'NULL'}",
              f"&output_dims, {ctx.ptr(y)}"),
    ]
    macs = int(np.prod(x.shape)) * w.shape[0] * w.shape[1] * w.shape[2]
    summary = (f"{w.shape[1]}x{w.shape[2]} filter, stride {g.stride[0]}x{g.stride[1]}, "
               f"{g.padding_name} padding (top {g.padding[0]}, left {g.padding[1]})"
               f"{_act_name(ctx)}")
    return LayerCode(kernel=kernel, body="\n".join(lines), macs=macs, summary=summary)



# --- 16x8: int16 activations, int8 weights (crt/kernels/conv16.c) ----------------------
#
# TFLM's 16x8 kernels ignore the zero points (the checks require 0) and take the model's
# bias as it is: no folding. The arithmetic follows the bias type (_mode): "wide" kernels
# take an int64 bias, "narrow" ones (kiln_*_b32_s16) an int32 one. Plain C only, so these
# layers have one variant and are not tuned.

def _act16(ctx: LowerCtx, y: Tensor) -> tuple[int, int]:
    return activation_range(ctx.op.options.get("fused_activation_function", "NONE"),
                            qparams(y)[0], 0, -32768, 32767)


def _bias16(ctx: LowerCtx, b: Tensor | None) -> str:
    """C name of a 16x8 layer's bias: the model's, or an int16 one widened to int64."""
    if b is None:
        return "NULL"
    if b.dtype == "int16":
        return ctx.const("bias", b.data.reshape(-1).astype(np.int64), "int64_t",
                         f"{b.name} widened to int64, as TFLM does")
    return ctx.ptr(b)


def pack_pairs16(rows: np.ndarray) -> np.ndarray:
    """(R, K) int16-range values → the words of the 16x8 SIMD kernels (conv.h): each row
    on its own (K + 1) / 2 words, two values per word, lane 0 first, an odd row's last
    word holding its last value in lane 0."""
    r, k = rows.shape
    padded = np.zeros((r, k + (k & 1)), dtype=np.int64)
    padded[:, :k] = rows
    lanes = padded.reshape(r, -1, 2) & 0xFFFF
    return (lanes[..., 0] | (lanes[..., 1] << 16)).astype(np.uint32).reshape(-1).view(np.int32)


def pack_quads16(rows: np.ndarray) -> np.ndarray:
    """(R, K) int8 → the words of the 16x8 _w8 kernels (conv.h): each row on its own
    (K + 3) / 4 words, per group of four k0..k3 the bytes (k0, k2, k1, k3) from the low
    byte, zeros past the row's end."""
    r, k = rows.shape
    padded = np.zeros((r, -(-k // 4) * 4), dtype=np.int64)
    padded[:, :k] = rows
    b = padded.reshape(r, -1, 4) & 0xFF
    words = b[..., 0] | (b[..., 2] << 8) | (b[..., 1] << 16) | (b[..., 3] << 24)
    return words.astype(np.uint32).reshape(-1).view(np.int32)


def pack_dw16(weights: np.ndarray) -> np.ndarray:
    """1HWC int8 → the words of kiln_dwconv2d_ch4_s16 (conv.h): C zero-padded to a
    multiple of 4; per block of four channels, per tap, [(c0, c1)][(c2, c3)]."""
    taps = weights.reshape(-1, weights.shape[3]).astype(np.int64)
    padded = np.zeros((taps.shape[0], -(-taps.shape[1] // 4) * 4), dtype=np.int64)
    padded[:, :taps.shape[1]] = taps
    blocks = padded.reshape(taps.shape[0], -1, 4).transpose(1, 0, 2)     # (B, taps, 4)
    return pack_pairs16(blocks.reshape(-1, 4))


def _simd16_suffix(knobs: dict) -> str:
    if knobs["variant"] == "generic":
        return ""
    return "_dsp" if knobs["weights"] == "s16" else "_dsp_w8"


def _packed16(ctx: LowerCtx, rows: np.ndarray, knobs: dict, what: str, kernel: str) -> str:
    s16 = knobs["weights"] == "s16"
    return ctx.const("filter", pack_pairs16(rows) if s16 else pack_quads16(rows), "int32_t",
                     f"{what} packed as {'int16 pairs' if s16 else 'int8 quads'} for {kernel} "
                     "(conv.h)")


def _kernel16(name: str, mode: str) -> str:
    return f"kiln_{name}_s16" if mode == "wide" else f"kiln_{name}_b32_s16"


def _summary16(mode: str) -> str:
    return "16x8, int64 accumulator" if mode == "wide" else "16x8, int32 accumulator"


def _lower_conv2d_s16(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    out_c = y.shape[3]
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    mult, shift = _multipliers(x, w, y, out_c)
    mode = _mode(ctx, x, b)
    act = _act16(ctx, y)
    shape = _conv_shape(x, w, y, g, False, act)
    shape = replace(shape, clamped=act != (-32768, 32767), dtype="int16")
    k = _pick("CONV_2D", shape, ctx.target, ctx.knobs)
    kernel = _kernel16("conv2d" + _simd16_suffix(k), mode)
    # kiln_conv2d[_dsp]_s16_get_buffer_size: one receptive field as int16
    scratch = 2 * w.shape[1] * w.shape[2] * w.shape[3]
    filter_name = ctx.ptr(w) if k["variant"] == "generic" else \
        _packed16(ctx, w.data.astype(np.int64).reshape(out_c, -1), k, w.name, kernel)
    lines = [
        _conv_params_c("kiln_conv_params_t", g, x, y, act),
        _quant_c(ctx, mult, shift),
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
        f"const kiln_context_t ctx = {{scratch, {scratch}}};",
        _call(kernel, "&ctx, &params, &quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {filter_name}, {_bias16(ctx, b)}", f"&output_dims, {ctx.ptr(y)}"),
    ]
    groups = x.shape[3] // w.shape[3]
    macs = int(np.prod(y.shape)) * w.shape[1] * w.shape[2] * w.shape[3]
    summary = (f"{w.shape[1]}x{w.shape[2]} filter, stride {g.stride[0]}x{g.stride[1]}, "
               f"dilation {g.dilation[0]}x{g.dilation[1]}, {g.padding_name} padding "
               f"(top {g.padding[0]}, left {g.padding[1]})"
               f"{f', {groups} groups' if groups > 1 else ''}{_act_name(ctx)}; {_summary16(mode)}")
    return LayerCode(kernel=kernel, body="\n".join(lines), scratch_bytes=scratch, macs=macs,
                     summary=summary, knobs=k, shape=shape)


def _lower_dwconv2d_s16(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    out_c = y.shape[3]
    mult_opt = int(ctx.op.options.get("depth_multiplier", 1))
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    mult, shift = _multipliers(x, w, y, out_c)
    act = _act16(ctx, y)
    shape = replace(_conv_shape(x, w, y, g, False, act, mult_opt),
                    clamped=act != (-32768, 32767), dtype="int16")
    k = _pick("DEPTHWISE_CONV_2D", shape, ctx.target, ctx.knobs)
    if k["variant"] == "generic":
        kernel, filter_name = "kiln_dwconv2d_s16", ctx.ptr(w)
    else:
        kernel = "kiln_dwconv2d_ch4_s16"
        filter_name = ctx.const("filter", pack_dw16(w.data), "int32_t",
                                f"{w.name} packed as int16 pairs for {kernel} (conv.h)")
    lines = [
        _conv_params_c("kiln_dwconv_params_t", g, x, y, act, depth_multiplier=mult_opt),
        _quant_c(ctx, mult, shift),
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
        _call(kernel, "&params, &quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {filter_name}, {_bias16(ctx, b)}", f"&output_dims, {ctx.ptr(y)}"),
    ]
    macs = int(np.prod(y.shape)) * w.shape[1] * w.shape[2]
    summary = (f"{w.shape[1]}x{w.shape[2]} filter, depth multiplier {mult_opt}, "
               f"stride {g.stride[0]}x{g.stride[1]}, dilation {g.dilation[0]}x{g.dilation[1]}, "
               f"{g.padding_name} padding (top {g.padding[0]}, left {g.padding[1]})"
               f"{_act_name(ctx)}; {_summary16('wide')}")
    return LayerCode(kernel=kernel, body="\n".join(lines), macs=macs, summary=summary,
                     knobs=k, shape=shape)


def _lower_fully_connected_s16(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    s = _fc_shape(x, w)
    act = _act16(ctx, y)
    mult, shift, w_off = _fc_quant(x, w, y, s.units)
    mode = _mode(ctx, x, b)
    shape = LayerShape(input=(s.batches, 1, 1, s.depth), filter=(s.units, 1, 1, s.depth),
                       output=(s.batches, 1, 1, s.units), requant_fast=False,
                       clamped=act != (-32768, 32767), dtype="int16")
    k = _pick("FULLY_CONNECTED", shape, ctx.target, ctx.knobs)
    kernel = _kernel16("fully_connected" + _simd16_suffix(k), mode)
    if k["variant"] == "generic":
        filter_name, param_w_off = ctx.ptr(w), w_off
    elif k["weights"] == "s16":
        # int16 pairs hold w + filter_offset: the kernel's filter_offset is 0.
        filter_name, param_w_off = _packed16(ctx, w.data.astype(np.int64) + w_off, k,
                                             f"{w.name} + filter_offset", kernel), 0
    else:
        filter_name, param_w_off = _packed16(ctx, w.data.astype(np.int64), k, w.name,
                                             kernel), w_off
    lines = [
        "static const kiln_fc_params_t params = {",
        f"    .input_offset = 0, .filter_offset = {param_w_off}, .output_offset = 0,",
        f"    .activation = {{{act[0]}, {act[1]}}},",
        "};",
        _quant_c(ctx, mult, shift),
        f"static const kiln_dims_t input_dims = {{{s.batches}, 1, 1, {s.depth}}};",
        f"static const kiln_dims_t filter_dims = {{{s.units}, 1, 1, {s.depth}}};",
        f"static const kiln_dims_t output_dims = {{{s.batches}, 1, 1, {s.units}}};",
        _call(kernel, "&params, &quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {filter_name}, {_bias16(ctx, b)}", f"&output_dims, {ctx.ptr(y)}"),
    ]
    kind = "per-channel" if w.quant.per_channel else "per-tensor"
    summary = (f"{s.batches} x {s.depth} -> {s.units} units, {kind} weights{_act_name(ctx)}; "
               f"{_summary16(mode)}")
    return LayerCode(kernel=kernel, body="\n".join(lines), macs=s.batches * s.depth * s.units,
                     summary=summary, knobs=k, shape=shape)


def _lower_transpose_conv_s16(ctx: LowerCtx) -> LayerCode:
    x, w, b, y = _tconv_tensors(ctx)
    out_c = y.shape[3]
    g = _tconv_geometry(ctx, y, w)
    mult, shift = _multipliers(x, w, y, out_c)
    kernel = "kiln_transpose_conv_s16"
    lines = [
        _conv_params_c("kiln_conv_params_t", g, x, y, _act16(ctx, y)),
        _quant_c(ctx, mult, shift),
        f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
        f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
        f"static const kiln_dims_t output_dims = {c_dims(y.shape)};",
        _call(kernel, "&params, &quant", f"&input_dims, {ctx.ptr(x)}",
              f"&filter_dims, {ctx.ptr(w)}, {_bias16(ctx, b)}", f"&output_dims, {ctx.ptr(y)}"),
    ]
    macs = int(np.prod(x.shape)) * w.shape[0] * w.shape[1] * w.shape[2]
    summary = (f"{w.shape[1]}x{w.shape[2]} filter, stride {g.stride[0]}x{g.stride[1]}, "
               f"{g.padding_name} padding (top {g.padding[0]}, left {g.padding[1]})"
               f"{_act_name(ctx)}; {_summary16('wide')}")
    return LayerCode(kernel=kernel, body="\n".join(lines), macs=macs, summary=summary)
