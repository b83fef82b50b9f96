"""Lifecycle traffic sends each input what its config declares: an end-to-end model's TYPE_STRING input
gets an encoded image, never numbers (an e2e model written by another team, alone in its repository,
once failed 12,867 of 12,867 lifecycle requests: FP64 tensors were sent to its image input)."""

from __future__ import annotations

import numpy as np

from harness.lifecycle.traffic import _dtype, request_inputs
from harness.repository.config import parse_config


def test_string_inputs_get_encoded_images_and_numbers_keep_their_type():
    config = parse_config('name: "e2e" max_batch_size: 4 input { name: "images" data_type: TYPE_STRING dims: [1] } '
                          'input { name: "conf" data_type: TYPE_FP32 dims: [1] } '
                          'input { name: "pixels" data_type: TYPE_UINT8 dims: [-1, -1, 3] }')
    inputs = dict(request_inputs(config))
    images = inputs["images"]
    assert images.dtype == np.object_ and images.shape == (1, 1) and images[0, 0][:2] == b"\xff\xd8"  # a JPEG
    assert _dtype(images) == "BYTES"
    assert inputs["conf"].dtype == np.float32 and inputs["pixels"].dtype == np.uint8
    assert inputs["pixels"].shape == (1, 1, 1, 3)
