"""A corrupted weight tensor, derived at run time from a model (nothing big is committed): the elements
of its largest Conv weight shuffled, which keeps every statistic of the tensor (so a histogram check on
weights would not see it) and breaks the function. This is what a bad copy or a wrong-layout load does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper


def corrupt_largest_conv_weight(source: Path, out: Path, seed: int = 0) -> str:
    """Writes the corrupted model to `out`; returns the tensor's name."""
    model = onnx.load(str(source))
    conv_weights = {n.input[1] for n in model.graph.node if n.op_type == "Conv" and len(n.input) > 1}
    candidates = [i for i in model.graph.initializer if i.name in conv_weights]
    if not candidates:
        raise ValueError(f"{source}: no Conv weight initializer to corrupt")
    target = max(candidates, key=lambda i: int(np.prod(i.dims)))
    array = numpy_helper.to_array(target).copy()
    flat = array.reshape(-1)
    np.random.default_rng(seed).shuffle(flat)
    target.CopyFrom(numpy_helper.from_array(flat.reshape(array.shape), target.name))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return target.name
