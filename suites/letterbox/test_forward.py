"""Forward letterbox properties: the tensor the model sees, for any source size and target."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.vision import strategies as yst
from letterbox_spec import PAD_VALUE, expected_ratio, expected_resized, resize_mistake


def where(image, target, meta) -> str:
    return f"source {image.shape[0]}x{image.shape[1]} (h x w) -> target {target}, meta {meta}"


@given(image=yst.images(), target=yst.target_shapes)
def test_output_shape_is_the_target(letterbox_impl, image, target):
    """The model input binding is fixed: anything but exactly [3, th, tw] is rejected or misread."""
    tensor, meta = letterbox_impl(image, target)
    assert tensor.shape == (3, *target), f"output shape {tensor.shape}, expected (3, {target[0]}, {target[1]}); {where(image, target, meta)}"
    assert tuple(meta.output_shape) == tuple(target), f"meta.output_shape {meta.output_shape} != {target}"


@given(image=yst.images(), target=yst.target_shapes)
def test_scale_is_min_ratio_and_content_is_rounded(letterbox_impl, image, target):
    """One scale for both axes, r = min(th/h, tw/w), content round(side * r): what training used."""
    source = image.shape[:2]
    _, meta = letterbox_impl(image, target)
    r = expected_ratio(source, target)
    assert meta.ratio == pytest.approx(r, rel=1e-9), f"ratio {meta.ratio}, expected min(th/h, tw/w) = {r}; {where(image, target, meta)}"
    expected = expected_resized(source, target)
    found = tuple(meta.resized_shape)
    assert found == expected, (
        f"resized content {found} (h, w), expected {expected} = round(side * {r:.6g}): "
        f"{resize_mistake(source, target, found)}; {where(image, target, meta)}"
    )


@given(image=yst.images(), target=yst.target_shapes)
def test_padding_is_centered(letterbox_impl, image, target):
    """Centered content: sides differ by at most 1 px and padding + content fill the target."""
    _, meta = letterbox_impl(image, target)
    top, bottom, left, right = meta.padding
    nh, nw = meta.resized_shape
    assert (top + nh + bottom, left + nw + right) == tuple(target), f"padding + content != target; {where(image, target, meta)}"
    assert abs(top - bottom) <= 1 and abs(left - right) <= 1, (
        f"padding not centered: top={top} bottom={bottom} left={left} right={right} "
        f"(opposite sides may differ by at most 1 px; all padding on one side?); {where(image, target, meta)}"
    )


@given(image=yst.images(), target=yst.target_shapes)
def test_padding_is_filled_with_pad_value(letterbox_impl, image, target):
    """Padding must be gray 114 (/255), the value the model saw around every training image."""
    tensor, meta = letterbox_impl(image, target)
    top, bottom, left, right = meta.padding
    th, tw = target
    mask = np.ones((th, tw), dtype=bool)
    mask[top : th - bottom, left : tw - right] = False
    band = tensor[:, mask]
    expected = np.float32(PAD_VALUE) / np.float32(255)
    if band.size:
        found = np.unique(np.round(band * 255).astype(int))
        assert np.allclose(band, expected, atol=1e-6), (
            f"padding filled with {found.tolist()[:5]} (/255), expected pad value {PAD_VALUE}/255; {where(image, target, meta)}"
        )


@given(image=yst.images(), target=yst.target_shapes)
def test_content_equals_plain_resize(letterbox_impl, image, target):
    """Inside the padding is the source resized with cv2.INTER_LINEAR (ultralytics' interpolation)."""
    tensor, meta = letterbox_impl(image, target)
    top, _, left, _ = meta.padding
    nh, nw = meta.resized_shape
    resized = image if image.shape[:2] == (nh, nw) else cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR)
    expected = resized.transpose(2, 0, 1).astype(np.float32) / np.float32(255)
    content = tensor[:, top : top + nh, left : left + nw]
    assert content.shape == expected.shape, f"content region {content.shape} cut from the output at the meta's padding, expected {expected.shape}; {where(image, target, meta)}"
    worst = float(np.abs(content - expected).max())
    assert worst <= 1e-6, f"content differs from a plain INTER_LINEAR resize by up to {worst * 255:.1f}/255; {where(image, target, meta)}"


@given(target=yst.target_shapes, seed=yst.seeds)
def test_image_at_target_size_is_unchanged_but_scaled(letterbox_impl, target, seed):
    """Nothing to resize or pad: the output is the source / 255, bit for bit."""
    image = yst.noise_image(target, seed)
    tensor, meta = letterbox_impl(image, target)
    expected = image.transpose(2, 0, 1).astype(np.float32) / np.float32(255)
    assert tuple(meta.padding) == (0, 0, 0, 0) and meta.ratio == 1.0, f"an image at the target size got {meta}"
    assert np.allclose(tensor, expected, atol=1e-6, rtol=0), f"an image at the target size was altered beyond /255; {where(image, target, meta)}"


@given(size=yst.small_image_sizes, target=yst.target_shapes, color=st.tuples(*[st.integers(0, 255)] * 3))
def test_layout_is_chw_rgb_float32_in_unit_range(letterbox_impl, size, target, color):
    """The model expects float32, CHW, RGB, [0, 1]: a solid color must land in the right planes."""
    image = np.empty((*size, 3), dtype=np.uint8)
    image[:] = color
    tensor, meta = letterbox_impl(image, target)
    assert tensor.dtype == np.float32, f"dtype {tensor.dtype}, expected float32"
    assert tensor.shape[0] == 3, f"channels-first expected, got shape {tensor.shape}"
    assert 0.0 <= tensor.min() and tensor.max() <= 1.0, f"values in [{tensor.min()}, {tensor.max()}], expected [0, 1]"
    top, _, left, _ = meta.padding
    center = tensor[:, top + meta.resized_shape[0] // 2, left + meta.resized_shape[1] // 2]
    expected = np.asarray(color, dtype=np.float32) / 255
    assert np.allclose(center, expected, atol=1e-6), (
        f"an RGB {color} image reads {np.round(center * 255).astype(int).tolist()} at the content center "
        f"(channel order RGB, /255 expected; BGR?); {where(image, target, meta)}"
    )


@given(images=yst.batches(), target=yst.target_shapes)
def test_batched_equals_unbatched(letterbox_impl, images, target):
    """A request batch must be processed as its images one by one: no shared scale or padding."""
    batch, metas = letterbox_impl.batch(images, target)
    assert batch.shape == (len(images), 3, *target), f"batch shape {batch.shape}"
    for i, image in enumerate(images):
        alone, meta = letterbox_impl(image, target)
        assert metas[i] == meta, f"image {i} of the batch got {metas[i]}, alone {meta}"
        assert np.array_equal(batch[i], alone), f"image {i} of the batch differs from the same image letterboxed alone; {where(image, target, meta)}"


@given(image=yst.images(yst.image_sizes(max_side=2048, max_pixels=2048 * 2048)),
       target=yst.target_shapes, stride=st.sampled_from([8, 16, 32]))
def test_auto_mode_is_minimal_stride_aligned(letterbox_impl, image, target, stride):
    """Rectangular inference (auto=True): the smallest canvas of stride multiples holding the content."""
    tensor, meta = letterbox_impl(image, target, auto=True, stride=stride)
    nh, nw = meta.resized_shape
    for side, content, full in ((tensor.shape[1], nh, target[0]), (tensor.shape[2], nw, target[1])):
        assert side % stride == 0 and content <= side <= full and side - content < stride, (
            f"auto canvas side {side} for content {content}, target {full}, stride {stride}: expected the "
            f"smallest multiple of {stride} >= {content}; {where(image, target, meta)}"
        )
