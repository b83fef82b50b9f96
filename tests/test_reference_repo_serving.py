"""Acceptance on the CPU server here: yolo_raw, yolo_e2e and yolo_ensemble load and serve from the
built reference repository (yolo_onnx/yolo_trt left out of the load list), and yolo_e2e's detections on
eval images equal the local reference pipeline's box for box (IoU >= 0.99, score within 1e-3).
A bounded number of images keeps it fast; mAP equality belongs to the accuracy suite."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness.reference import build as reference_build
from harness.reference import loadable_models, server_backends
from harness.repository.scratch import scratch_copy
from harness.servers import ServerSettings, create_server
from harness.vision.matching import match_detections
from harness.vision.pipeline import LocalPipeline
from tests.test_reference_repo import model_source  # noqa: F401 - the shared fixture

EVAL_IMAGES = reference_build.paths.FIXTURES / "shapes_eval" / "images"
IMAGES = 6  # bounded: ~0.1 s of ORT per 640 image on 2 cores, for the server and the local reference


@pytest.fixture(scope="module")
def built(model_source) -> Path:  # noqa: F811
    return reference_build.build_reference_repository("cpu")


@pytest.fixture(scope="module")
def server(built):
    repository = scratch_copy(built)
    load = loadable_models(repository, server_backends("process"))
    with create_server("process", ServerSettings(repository=repository, load_models=load, startup_timeout=180)) as server:
        yield server


@pytest.fixture(scope="module")
def client(server):
    client = httpclient.InferenceServerClient(server.endpoints.http, network_timeout=300)
    yield client
    client.close()


def eval_images() -> list[bytes]:
    paths = sorted(EVAL_IMAGES.glob("*"))
    if not paths:
        pytest.skip(f"no evaluation images in {EVAL_IMAGES}")
    step = max(1, len(paths) // IMAGES)  # spread over slices and sizes, not the first few
    return [p.read_bytes() for p in paths[::step][:IMAGES]]


def images_input(blobs: list[bytes]) -> httpclient.InferInput:
    tensor = httpclient.InferInput("images", [len(blobs), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[b] for b in blobs], dtype=object))
    return tensor


def detect(client, model: str, blobs: list[bytes], **parameters):
    result = client.infer(model, [images_input(blobs)], parameters=parameters or None)
    return result.as_numpy("detections"), result.as_numpy("num_detections").reshape(-1)


def test_loads_what_this_server_can_and_nothing_else(client):
    index = {entry["name"]: entry.get("state") for entry in client.get_model_repository_index()}
    for name in ("yolo_raw", "yolo_e2e", "yolo_ensemble", "yolo_preprocess", "yolo_postprocess"):
        assert index.get(name) == "READY", f"{name}: {index.get(name)} (index {index})"
    assert index.get("yolo_onnx") != "READY", "yolo_onnx needs the onnxruntime backend this server lacks"


def assert_same_detections(served, served_num, local, local_num, label):
    assert served_num.tolist() == local_num.tolist(), f"{label}: detections per image {served_num} vs local {local_num}"
    for i, n in enumerate(local_num):
        ours, ref = served[i, :n], local[i, :n]
        assert (served[i, n:] == -1).all(), f"{label}: image {i} rows after {n} are not -1 padding"
        match = match_detections(ref, ours, iou_threshold=0.99)
        # Boxes clipped to zero area have no IoU (0/0): those must agree coordinate by coordinate.
        unmatched = [(m, e) for m, e in zip(match.missed, match.extra)
                     if not (np.abs(ref[m, :4] - ours[e, :4]).max() <= 1e-3 and ref[m, 5] == ours[e, 5])]
        assert len(match.missed) == len(match.extra) and not unmatched, (
            f"{label}: image {i}: {len(match.missed)} local boxes without a served one at IoU>=0.99, "
            f"{len(match.extra)} extra; local rows {ref[match.missed].tolist()} vs served {ours[match.extra].tolist()}")
        assert len(match.class_flips) == 0, f"{label}: image {i}: {len(match.class_flips)} class flips"
        pairs = np.concatenate([match.pairs.reshape(-1, 2), np.stack([match.missed, match.extra], 1).reshape(-1, 2)]).astype(int)
        scores = np.abs(ref[pairs[:, 0], 4] - ours[pairs[:, 1], 4])
        assert scores.max(initial=0) <= 1e-3, f"{label}: image {i}: score differs by {scores.max():.2e} (> 1e-3)"


@pytest.mark.parametrize("parameters", [{}, {"conf": 0.001, "max_det": 100}], ids=["config-thresholds", "request-override"])
def test_e2e_matches_the_local_reference_box_for_box(client, built, parameters):
    blobs = eval_images()
    served, served_num = detect(client, "yolo_e2e", blobs, **parameters)
    assert served.shape == (len(blobs), 300, 6)
    local = LocalPipeline(built / "yolo_e2e" / "1" / "model.onnx", imgsz=640, conf=parameters.get("conf", 0.25),
                          iou=0.7, max_det=parameters.get("max_det", 300))
    local_detections, local_num = local(blobs)
    assert_same_detections(served, served_num, local_detections, local_num, f"yolo_e2e {parameters or 'defaults'}")
    if parameters:  # the override must have done something: an untrained model finds nothing at 0.25
        assert 0 < served_num.max() <= parameters["max_det"], served_num


def test_ensemble_equals_e2e(client):
    blobs = eval_images()[:3]
    e2e = detect(client, "yolo_e2e", blobs, conf=0.001)
    ensemble = detect(client, "yolo_ensemble", blobs, conf=0.001)
    assert ensemble[1].max() > 0
    assert_same_detections(*ensemble, *e2e, "yolo_ensemble vs yolo_e2e")


def test_raw_equals_onnxruntime_on_a_letterboxed_batch(client, built):
    from harness.engines.ort import OrtEngine
    from harness.vision.pipeline import DetectionPipeline

    batch, _ = DetectionPipeline(imgsz=640).preprocess(eval_images()[:2])
    tensor = httpclient.InferInput("images", list(batch.shape), "FP32")
    tensor.set_data_from_numpy(batch)
    served = client.infer("yolo_raw", [tensor]).as_numpy("output0")
    local = OrtEngine(built / "yolo_raw" / "1" / "model.onnx").infer({"images": batch})["output0"]
    assert served.shape == local.shape and served.shape[0] == 2
    np.testing.assert_allclose(served, local, atol=1e-4, rtol=1e-5)



def _truncated_png() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buffer, format="PNG")
    return buffer.getvalue()[:-30]


@pytest.mark.parametrize("blob, reason", [
    (b"", "image bytes are empty"),
    (b"GIF? no, plain text", "not a recognised image format"),
    (None, "truncated or corrupt"),
])
@pytest.mark.parametrize("model", ["yolo_e2e", "yolo_ensemble"])
def test_bad_image_is_an_error_response_naming_the_problem(client, model, blob, reason):
    blob = _truncated_png() if blob is None else blob
    with pytest.raises(InferenceServerException, match=reason):
        detect(client, model, [blob])


def test_bad_request_parameter_is_refused(client):
    with pytest.raises(InferenceServerException, match=r"conf=2.0 is outside \[0, 1\]"):
        detect(client, "yolo_e2e", eval_images()[:1], conf=2.0)


def test_bad_request_fails_alone_and_batching_merges_requests(server, client):
    """16 concurrent one-image requests, one of them garbage: only that one fails, and the server
    executed fewer batches than requests (dynamic batching merged them)."""
    good = eval_images()[0]
    before = client.get_inference_statistics("yolo_e2e")["model_stats"][0]

    def one(i):
        # One client per thread: the HTTP client (geventhttpclient) is not thread-safe.
        own = httpclient.InferenceServerClient(server.endpoints.http, network_timeout=120)
        try:
            return detect(own, "yolo_e2e", [b"garbage" if i == 5 else good])[1][0]
        except InferenceServerException as error:
            return str(error)
        finally:
            own.close()

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    assert "not a recognised image format" in str(results[5])
    assert all(isinstance(r, (int, np.integer)) for i, r in enumerate(results) if i != 5), results
    after = client.get_inference_statistics("yolo_e2e")["model_stats"][0]
    executions = int(after["execution_count"]) - int(before["execution_count"])
    assert executions < 15, f"{executions} executions for 15 good requests: nothing was batched"
