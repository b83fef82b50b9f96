"""The device pipeline (harness.vision.gpu) against its numpy twins: the same NMS answer exactly, the
same letterbox geometry and pixels within one grey level, the same restore; the engine's shape plan and
CUDA graphs against its plain run. Runs on CPU torch where torch is installed (the gpu extra), the CUDA
parts on a GPU host; elsewhere it skips with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.vision.decode import decode_batch as numpy_decode
from harness.vision.letterbox import LETTERBOX
from harness.vision.pipeline import DetectionPipeline, Job

torch = pytest.importorskip("torch", reason="torch not installed (the gpu extra): the device pipeline is for GPU hosts")

from harness.vision.gpu.decode import decode_batch  # noqa: E402
from harness.vision.gpu.image import decode_images  # noqa: E402
from harness.vision.gpu.letterbox import DeviceLetterbox  # noqa: E402
from harness.vision.gpu.pipeline import DevicePipeline  # noqa: E402

EVAL_IMAGES = sorted((Path(__file__).parents[1] / "fixtures" / "shapes_eval" / "images").rglob("*.jpg"))
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: CUDA graphs and nvJPEG run on the GPU host")


def random_raw(rng, n: int, nc: int = 6, anchors: int = 600) -> np.ndarray:
    """Dense overlapping boxes with skewed scores: long suppression chains, ties across classes."""
    raw = np.zeros((n, 4 + nc, anchors), np.float32)
    raw[:, 0:2] = rng.uniform(0, 640, (n, 2, anchors))
    raw[:, 2:4] = rng.uniform(4, 160, (n, 2, anchors))
    raw[:, 4:] = rng.uniform(0, 1, (n, nc, anchors)) ** 3
    raw[:, 4:, :20] = 0.5  # exact score ties: the stable order decides
    return raw


@pytest.mark.parametrize("seed", range(6))
def test_nms_gives_the_numpy_answer_exactly(seed):
    rng = np.random.default_rng(seed)
    raw = random_raw(rng, 4)
    conf, iou, max_det = [0.25, 0.5, 0.05, 0.99], [0.7, 0.45, 0.3, 0.7], [300, 40, 7, 300]
    got, num = decode_batch(torch.from_numpy(raw), torch.tensor(conf), torch.tensor(iou, dtype=torch.float64),
                            torch.tensor(max_det), rows=300)
    for i in range(len(raw)):
        want, want_num = numpy_decode(raw[i: i + 1], conf[i], iou[i], max_det[i])
        assert int(num[i]) == int(want_num[0]), f"image {i}: {int(num[i])} kept, numpy keeps {int(want_num[0])}"
        np.testing.assert_array_equal(got[i, : max_det[i]].numpy(), want[0], err_msg=f"image {i}")
        assert (got[i, max_det[i]:] == -1).all(), f"image {i}: rows past max_det are not padding"


def test_nms_keeps_a_pair_at_exactly_the_iou_threshold():
    """IoU([0,0,10,1], [0,0,7,1]) is exactly 0.7: numpy keeps both (suppression is strict)."""
    raw = np.zeros((1, 5, 2), np.float32)
    raw[0, :4, 0], raw[0, :4, 1] = (5, 0.5, 10, 1), (3.5, 0.5, 7, 1)
    raw[0, 4] = (0.9, 0.8)
    got, num = decode_batch(torch.from_numpy(raw), torch.tensor([0.25]), torch.tensor([0.7], dtype=torch.float64),
                            torch.tensor([300]), rows=300)
    want, want_num = numpy_decode(raw, 0.25, 0.7, 300)
    assert int(want_num[0]) == 2 and int(num[0]) == 2


def test_nms_truncates_candidates_like_numpy():
    from harness.vision.decode import decode_image

    raw = random_raw(np.random.default_rng(9), 1, anchors=2000)
    got, num = decode_batch(torch.from_numpy(raw), torch.tensor([0.0]), torch.tensor([0.6], dtype=torch.float64), torch.tensor([300]),
                            rows=300, max_nms=50)
    want = decode_image(raw[0], 0.0, 0.6, 300, max_nms=50)
    assert int(num[0]) == len(want)
    np.testing.assert_array_equal(got[0, : len(want)].numpy(), want)


def test_nothing_above_conf_gives_padding_only():
    raw = random_raw(np.random.default_rng(1), 2)
    got, num = decode_batch(torch.from_numpy(raw), torch.tensor([1.0, 1.0]), torch.tensor([0.7, 0.7], dtype=torch.float64),
                            torch.tensor([300, 300]), rows=300)
    assert num.tolist() == [0, 0] and (got == -1).all()


@pytest.mark.parametrize("shape", [(480, 640), (640, 480), (333, 517), (640, 640), (100, 60), (1080, 1920)])
def test_device_letterbox_matches_cv2_within_one_level(shape):
    rng = np.random.default_rng(sum(shape))
    image = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
    want, want_meta = LETTERBOX(image, 640)
    box = DeviceLetterbox(640, 2, "cpu", dtype=torch.float32)
    got, metas = box.batch([torch.from_numpy(image).permute(2, 0, 1).contiguous()])
    assert metas == [want_meta]
    levels = np.abs(got[0].numpy() - want) * 255
    assert levels.max() <= 1.0 + 1e-3, f"{shape}: {levels.max():.2f} grey levels off cv2.INTER_LINEAR"
    assert levels.mean() < 0.1, f"{shape}: mean {levels.mean():.3f} levels off"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_device_letterbox_batch_is_each_image_alone(dtype):
    """Same-size runs are written through a view, scattered groups by index: both give each image's own
    canvas, and in half precision exactly the float32 level / 255 rounded once more."""
    rng = np.random.default_rng(5)
    shapes = [(480, 640), (480, 640), (333, 517), (480, 640), (480, 640)]  # a run, a stranger, a split run
    images = [torch.from_numpy(rng.integers(0, 256, (*s, 3), dtype=np.uint8)).permute(2, 0, 1).contiguous() for s in shapes]
    box = DeviceLetterbox(640, len(images), "cpu", dtype=dtype)
    batch, metas = box.batch(images)
    batch = batch.clone()
    for i, image in enumerate(images):
        alone, meta = DeviceLetterbox(640, 1, "cpu", dtype=torch.float32).batch([image])
        assert metas[i] == meta[0]
        assert torch.equal(batch[i], alone[0].to(dtype)), f"image {i} {shapes[i]} differs from its letterbox alone"


def test_device_restore_is_letterbox_restore():
    rng = np.random.default_rng(3)
    box = DeviceLetterbox(640, 2, "cpu", dtype=torch.float32)
    metas = [box.meta((480, 640)), box.meta((1080, 1920))]
    rows = np.full((2, 5, 6), -1.0, np.float32)
    rows[:, :3, :4] = np.sort(rng.uniform(-20, 660, (2, 3, 4)).astype(np.float32), axis=2)[..., [0, 1, 2, 3]]
    rows[:, :3, 4:] = 0.5
    num = torch.tensor([3, 2])
    got = box.restore(torch.from_numpy(rows.copy()), num, metas).numpy()
    for i, meta in enumerate(metas):
        n = int(num[i])
        np.testing.assert_allclose(got[i, :n, :4], LETTERBOX.restore_boxes(rows[i, :n, :4], meta), rtol=0, atol=1e-4)
        assert (got[i, n:] == rows[i, n:]).all(), "padding rows must stay -1"


def test_decode_images_routes_bad_images_to_their_error():
    blobs = [EVAL_IMAGES[0].read_bytes(), b"", b"not an image", EVAL_IMAGES[0].read_bytes()[:500]]
    out = decode_images(blobs, "cpu")
    assert out[0].dtype == torch.uint8 and out[0].shape[0] == 3
    assert [type(o).__name__ for o in out[1:]] == ["ValueError"] * 3
    assert "empty" in str(out[1]) and "not a recognised image" in str(out[2]) and "truncated" in str(out[3])


@pytest.fixture(scope="module")
def fp32_engine(tmp_path_factory):
    import onnx

    from harness.engines.torch_engine import TorchEngine
    from harness.engines.variants import load_reference
    from tests.test_engines import source_model

    path = tmp_path_factory.mktemp("gpu_pipeline") / "fp32.onnx"
    onnx.save(load_reference(source_model()), str(path))
    return path, TorchEngine(path, device="cpu", precision="fp32")


def test_device_pipeline_matches_the_host_pipeline(fp32_engine):
    """Same engine, both pipelines, six eval images in two requests and a broken third: same detection
    counts and classes, boxes within 0.1 px (the resampler's grey level), the bad request alone fails."""
    path, engine = fp32_engine
    blobs = [p.read_bytes() for p in EVAL_IMAGES[:6]]
    results = DevicePipeline(engine, 640, 8, 300).detect(
        [Job(blobs[:4], 0.25, 0.7, 300), Job([b"junk"], 0.25, 0.7, 300), Job(blobs[4:], 0.25, 0.7, 300)])
    assert isinstance(results[1], ValueError) and "image 1 of 1" in str(results[1])
    got = torch.cat([results[0][0], results[2][0]]).numpy()
    got_num = torch.cat([results[0][1], results[2][1]]).numpy()[:, 0]
    host = DetectionPipeline(imgsz=640)
    batch, metas = host.preprocess(blobs)
    want, want_num = host.postprocess(engine.infer({"images": batch})["output0"], metas)
    assert got_num.tolist() == want_num.tolist()
    for i, n in enumerate(want_num):
        np.testing.assert_array_equal(got[i, :n, 5], want[i, :n, 5])
        assert np.abs(got[i, :n, :4] - want[i, :n, :4]).max(initial=0) < 0.5, f"image {i}"
        assert np.abs(got[i, :n, 4] - want[i, :n, 4]).max(initial=0) < 0.01, f"image {i}"
        assert (got[i, n:] == -1).all()


@needs_cuda
def test_cuda_graphs_replay_the_plan(fp32_engine):
    from harness.engines.torch_engine import TorchEngine

    path, _ = fp32_engine
    engine = TorchEngine(path, precision="fp16")
    assert engine.capture([1, 4], (640, 640)) == [1, 4]
    x = torch.rand(4, 3, 640, 640, device="cuda", dtype=torch.float16)
    plain = engine.plan(tuple(x.shape)).run(engine._layout(x)).float()
    torch.testing.assert_close(engine.forward(x), plain, rtol=2e-3, atol=1e-2)  # the same kernels, replayed
    padded = engine.forward(x[:3])  # padded into the batch-4 graph
    reference = engine.plan((3, 3, 640, 640)).run(engine._layout(x[:3])).float()
    assert padded.shape == reference.shape
    # batch 3 alone may get other cuDNN kernels than batch 4: FP16 steps (0.125 at 100-200 px, 0.5 at 600)
    torch.testing.assert_close(padded, reference, rtol=1e-2, atol=0.25)
    again = engine.forward(x[:1])
    assert (again - engine.forward(x[:1])).abs().max().item() == 0


def test_shape_plan_binds_shape_operands_as_host_lists(fp32_engine):
    """What lets a plan replay in a CUDA graph and trace in torch.compile without a graph break: no
    shape, size or axis operand is a tensor."""
    from harness.engines.torch_engine import HOST_ARGS

    _, engine = fp32_engine
    plan = engine.plan((1, 3, 64, 64))
    ops = {fn: op for op, fn in engine._ops.items()}
    shaped = [(ops[fn], value) for fn, _, bound, _, _ in plan.steps for position, (name, value) in enumerate(bound)
              if name is None and value is not None and position in HOST_ARGS.get(ops[fn], ())]
    assert {op for op, _ in shaped} >= {"Reshape", "Split"}  # what a YOLO head spells with shape operands
    assert all(isinstance(value, list) for _, value in shaped), [op for op, v in shaped if not isinstance(v, list)]


def test_compile_mode_is_checked_before_anything_compiles(fp32_engine):
    from harness.engines.torch_engine import TorchEngine

    path, _ = fp32_engine
    with pytest.raises(ValueError, match="compile_mode must be one of"):
        TorchEngine(path, device="cpu", precision="fp32", compile_mode="reduce-overhead")


@needs_cuda
def test_compiled_plan_replays_as_a_cuda_graph(fp32_engine):
    """torch.compile'd plans under our CUDA graphs add no error beyond FP16's own. The inputs are two
    evaluation images (real pixels, not noise: a random tensor drives the net out of distribution, where
    two FP16 kernel orders once differed by 1.0 on 2 of 42,000 elements), and the bound is measured in
    the same run: the compiled plan's distance to the FP32 answer may be at most twice the eager FP16
    plan's, plus one FP16 step at the largest box coordinate (320 px: 0.25)."""
    from harness.engines.torch_engine import TorchEngine

    path, _ = fp32_engine
    eager = TorchEngine(path, precision="fp16")
    exact = TorchEngine(path, precision="fp32")
    compiled = TorchEngine(path, precision="fp16", compile_mode="default")
    assert compiled.capture([2], (320, 320)) == [2]
    batch, _ = LETTERBOX.batch([_rgb(p) for p in EVAL_IMAGES[:2]], 320)
    x = torch.from_numpy(batch).cuda()
    fp32 = exact.plan(tuple(x.shape)).run(exact._layout(x)).float()
    x16 = x.half()
    eager_error = (eager.plan(tuple(x16.shape)).run(eager._layout(x16)).float() - fp32).abs()
    compiled_error = (compiled.forward(x16).float() - fp32).abs()
    bound = 2 * eager_error.max().item() + 0.25
    assert compiled_error.max().item() <= bound, (
        f"compiled FP16 is {compiled_error.max().item():.3f} from FP32, eager FP16 {eager_error.max().item():.3f} "
        f"(bound {bound:.3f})")


def _rgb(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


@needs_cuda
def test_device_pipeline_on_cuda_matches_cpu(fp32_engine):
    """nvJPEG + FP16 on the GPU against libjpeg + FP32 on CPU through the same pipeline code: the same
    objects found (IoU >= 0.5, no class flip), boxes within a few pixels; borderline boxes may come and go."""
    from harness.engines.torch_engine import TorchEngine
    from harness.vision.matching import match_detections

    path, cpu_engine = fp32_engine
    blobs = [p.read_bytes() for p in EVAL_IMAGES[:8]]
    gpu = DevicePipeline(TorchEngine(path, precision="fp16"), 640, 8, 300, graph_batches=[1, 8])
    (got, got_num), = gpu.detect([Job(blobs, 0.25, 0.7, 300)])
    (want, want_num), = DevicePipeline(cpu_engine, 640, 8, 300).detect([Job(blobs, 0.25, 0.7, 300)])
    matched = total = 0
    for i in range(len(blobs)):
        a = want[i, : int(want_num[i, 0])].numpy().astype(np.float64)
        b = got[i, : int(got_num[i, 0])].numpy().astype(np.float64)
        match = match_detections(a, b, 0.5)
        matched, total = matched + len(match.pairs), total + max(len(a), len(b))
        if len(match.pairs):
            pa, pb = a[match.pairs[:, 0]], b[match.pairs[:, 1]]
            assert (pa[:, 5] == pb[:, 5]).all(), f"image {i}: class flip"
            assert np.abs(pa[:, :4] - pb[:, :4]).max() < 6.0, f"image {i}: boxes moved"
    assert matched >= 0.9 * total, f"only {matched} of {total} detections matched"


def _timed_detect(pipeline, blobs):
    import time

    start = time.perf_counter()
    (result,) = pipeline.detect([Job(blobs, 0.25, 0.7, 300)])
    wall = time.perf_counter() - start
    return result, pipeline.stage_seconds, wall


def test_host_stages_add_up_to_the_batch(fp32_engine):
    """On the CPU path every stage takes time and together they are (nearly all of) the batch's wall time."""
    _, engine = fp32_engine
    _, stages, wall = _timed_detect(DevicePipeline(engine, 640, 8, 300), [p.read_bytes() for p in EVAL_IMAGES[:4]])
    assert set(stages) == {"decode", "letterbox", "inference", "nms"} and all(s > 0 for s in stages.values()), stages
    assert 0.8 * wall <= sum(stages.values()) <= wall, (stages, wall)


@needs_cuda
def test_stream_stages_time_the_gpu_work_not_the_first_wait(fp32_engine):
    """On the GPU the host only queues letterbox and inference and NMS's read-back waits for them: timed by
    events on the stream, inference (the engine, ~80 % of the GPU time) dominates and NMS does not absorb it;
    together the stages stay within the batch's wall time."""
    from harness.engines.torch_engine import TorchEngine

    path, _ = fp32_engine
    blobs = [p.read_bytes() for p in EVAL_IMAGES[:8]] * 4
    gpu = DevicePipeline(TorchEngine(path, precision="fp16"), 640, 32, 300)
    _timed_detect(gpu, blobs)  # warm-up: cuDNN's algorithm choice, nvJPEG's handle
    _, stages, wall = _timed_detect(gpu, blobs)
    assert all(s > 0 for s in stages.values()), stages
    assert stages["inference"] > stages["nms"] and stages["inference"] > stages["letterbox"], stages
    assert 0.5 * wall <= sum(stages.values()) <= 1.05 * wall, (stages, wall)
