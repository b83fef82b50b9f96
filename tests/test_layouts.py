"""harness.repository.layouts reads every input and output of a config and names its layout and role; the
config suite's role check, the accuracy suite's served candidates, the served letterbox checks and the
protocol suite all use it, and harness.vision.detections decodes each output layout into rows in source
pixels. The configs below are written the way the public projects of issue #22 write theirs (the same
inputs, outputs, shapes and data types; not their files): an onnxruntime detector + Python postprocess
ensemble with num_detections + boxes outputs (omarabid59/yolov8-triton), a UINT8 pixels preprocess +
detector + postprocess ensemble (odlab-ai/odlab-triton), a TYPE_STRING base64 preprocess + JSON
postprocess (gametwix/YOLO-TRITON-BASE64), EfficientNMS and raw TensorRT configs (levipereira/
triton-server-yolo), and Ultralytics' nms=True export. Instant; no server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from harness import paths
from harness.checks.findings import NotApplicable
from harness.checks.model import load_entry
from harness.checks.role import check_role
from harness.repository.config import parse_config, read_config, write_config
from harness.repository.layouts import (BASE64, ENCODED, JSON, NMS, PIXELS, RAW, ROWS, TENSOR, OutputLayout,
                                        parse_declaration, read_layout)
from harness.repository.manifest import Manifest, ManifestError, load_manifest
from harness.vision.detections import as_written, raw_detection_rows, to_source_rows
from harness.vision.letterbox import LETTERBOX
from tests.conftest import load_module

# -- the public projects' layouts, as configs ------------------------------------------------------
OMARABID = {  # onnxruntime detector + Python postprocess, max_batch_size 0 (the batch dim in the dims)
    "yolov8_ensemble": """name: "yolov8_ensemble" platform: "ensemble" max_batch_size: 0
        input { name: "images" data_type: TYPE_FP32 dims: [1, 3, 640, 640] }
        output { name: "num_detections" data_type: TYPE_INT32 dims: [1] }
        output { name: "detection_boxes" data_type: TYPE_FP32 dims: [1000, 4] }
        output { name: "detection_scores" data_type: TYPE_FP32 dims: [1000] }
        output { name: "detection_classes" data_type: TYPE_INT32 dims: [1000] }""",
    "yolov8_onnx": """platform: "onnxruntime_onnx" max_batch_size: 0
        input { name: "images" data_type: TYPE_FP32 dims: [1, 3, 640, 640] }
        output { name: "output0" data_type: TYPE_FP32 dims: [-1, -1, -1] }""",
    "postprocess": """name: "postprocess" backend: "python" max_batch_size: 0
        input { name: "INPUT_0" data_type: TYPE_FP32 dims: [-1, -1, -1] }
        output { name: "num_detections" data_type: TYPE_INT32 dims: [1] }
        output { name: "detection_boxes" data_type: TYPE_FP32 dims: [1000, 4] }
        output { name: "detection_scores" data_type: TYPE_FP32 dims: [1000] }
        output { name: "detection_classes" data_type: TYPE_INT32 dims: [1000] }""",
}
ODLAB = {  # UINT8 pixels -> Python preprocess -> TensorRT detector -> Python postprocess
    "ensemble": """name: "ensemble" platform: "ensemble" max_batch_size: 16
        input { name: "INPUT" data_type: TYPE_UINT8 dims: [-1, -1, -1] }
        output { name: "OUTPUT" data_type: TYPE_FP32 dims: [-1, -1, 6] }""",
    "preprocess": """name: "preprocess" backend: "python" max_batch_size: 16
        input { name: "INPUT_0" data_type: TYPE_UINT8 dims: [-1, -1, -1] }
        output { name: "OUTPUT_0" data_type: TYPE_FP32 dims: [3, 640, 640] }
        output { name: "OUTPUT_1" data_type: TYPE_FP32 dims: [1] }
        output { name: "OUTPUT_2" data_type: TYPE_FP32 dims: [2] }
        output { name: "OUTPUT_3" data_type: TYPE_INT32 dims: [2] }""",
    "model": """name: "model" platform: "tensorrt_plan" max_batch_size: 16
        input { name: "images" data_type: TYPE_FP32 dims: [3, -1, -1] }
        output { name: "output0" data_type: TYPE_FP32 dims: [-1, -1] }
        output { name: "1877" data_type: TYPE_FP32 dims: [-1, -1] }""",
    "postprocess": """name: "postprocess" backend: "python" max_batch_size: 16
        input { name: "INPUT_0" data_type: TYPE_FP32 dims: [84, 8400] }
        input { name: "INPUT_1" data_type: TYPE_FP32 dims: [1] }
        input { name: "INPUT_2" data_type: TYPE_FP32 dims: [2] }
        input { name: "INPUT_3" data_type: TYPE_INT32 dims: [2] }
        output { name: "OUTPUT_0" data_type: TYPE_FP32 dims: [-1, -1, 6] }""",
    "yolov_preprocess": """name: "yolov_preprocess" backend: "python" max_batch_size: 16
        input { name: "INPUT_0" data_type: TYPE_UINT8 dims: [-1] }
        output { name: "OUTPUT_0" data_type: TYPE_FP32 dims: [3, 640, 640] }""",
}
GAMETWIX = {  # base64 TYPE_STRING -> preprocess -> TensorRT -> JSON postprocess
    "yolo_base64": """name: "yolo_base64" platform: "ensemble" max_batch_size: 8
        input { name: "IMAGE_BASE64" data_type: TYPE_STRING dims: [1] }
        output { name: "BBOXS" data_type: TYPE_STRING dims: [1] }""",
    "preprocess": """name: "preprocess" backend: "python" max_batch_size: 8
        input { name: "images_base64" data_type: TYPE_STRING dims: [1] }
        output { name: "images" data_type: TYPE_FP32 dims: [3, 640, 640] }
        output { name: "shapes" data_type: TYPE_INT32 dims: [2] }""",
    "yolov8": """name: "yolov8" backend: "tensorrt" max_batch_size: 8
        input { name: "input__0" data_type: TYPE_FP32 dims: [3, 640, 640] }
        output { name: "output__0" data_type: TYPE_FP32 dims: [84, 8400] }""",
}
LEVIPEREIRA = {  # the configs start-triton-server.sh writes: EfficientNMS end-to-end, and raw
    "yolov9-c": """name: "yolov9-c" platform: "tensorrt_plan" max_batch_size: 8
        input { name: "images" data_type: TYPE_FP32 dims: [3, 640, 640] }
        output { name: "num_dets" data_type: TYPE_INT32 dims: [1] }
        output { name: "det_boxes" data_type: TYPE_FP32 dims: [100, 4] }
        output { name: "det_scores" data_type: TYPE_FP32 dims: [100] }
        output { name: "det_classes" data_type: TYPE_INT32 dims: [100] }""",
    # models_config/yolov8_onnx_trt.pbtxt as start-triton-server.sh writes it (--plugin yoloNMS): YOLO_NMS_TRT's
    # det_indices beside EfficientNMS's four outputs
    "yolov8n": """name: "yolov8n" platform: "tensorrt_plan" max_batch_size: 8
        default_model_filename: "infer-yoloNMS-yolov8n-max-batch-8.engine"
        input { name: "images" data_type: TYPE_FP32 dims: [3, 640, 640] }
        output { name: "num_dets" data_type: TYPE_INT32 dims: [1] }
        output { name: "det_boxes" data_type: TYPE_FP32 dims: [100, 4] }
        output { name: "det_scores" data_type: TYPE_FP32 dims: [100] }
        output { name: "det_classes" data_type: TYPE_INT32 dims: [100] }
        output { name: "det_indices" data_type: TYPE_INT32 dims: [100] }""",
    "yolov9-c-raw": """name: "yolov9-c-raw" platform: "tensorrt_plan" max_batch_size: 8
        input { name: "images" data_type: TYPE_FP32 dims: [3, 640, 640] }
        output { name: "output0" data_type: TYPE_FP32 dims: [84, 8400] }""",
}
ULTRALYTICS_NMS = """name: "yolo11_nms" platform: "onnxruntime_onnx" max_batch_size: 0
    input { name: "images" data_type: TYPE_FP32 dims: [-1, 3, 640, 640] }
    output { name: "output0" data_type: TYPE_FP32 dims: [-1, 300, 6] }"""


def layout_of(text: str, declared=None):
    config = parse_config(text)
    return read_layout(config, declared, config.name or "model")


# (project, model) -> (role, input kind, output kind)
EXPECTED = {
    ("omarabid", "yolov8_ensemble"): ("e2e", TENSOR, NMS),
    ("omarabid", "yolov8_onnx"): ("raw", TENSOR, RAW),
    ("omarabid", "postprocess"): (None, None, NMS),
    ("odlab", "ensemble"): ("e2e", PIXELS, ROWS),
    ("odlab", "preprocess"): (None, PIXELS, None),
    ("odlab", "model"): ("raw", TENSOR, RAW),
    ("odlab", "postprocess"): (None, None, ROWS),
    ("odlab", "yolov_preprocess"): (None, ENCODED, None),
    ("gametwix", "yolo_base64"): (None, BASE64, None),
    ("gametwix", "preprocess"): (None, BASE64, None),
    ("gametwix", "yolov8"): ("raw", TENSOR, RAW),
    ("levipereira", "yolov9-c"): ("e2e", TENSOR, NMS),
    ("levipereira", "yolov9-c-raw"): ("raw", TENSOR, RAW),
    ("levipereira", "yolov8n"): ("e2e", TENSOR, NMS),
}
PROJECTS = {"omarabid": OMARABID, "odlab": ODLAB, "gametwix": GAMETWIX, "levipereira": LEVIPEREIRA}


@pytest.mark.parametrize("project, model", sorted(EXPECTED), ids=lambda v: v)
def test_public_project_layouts(project, model):
    layout = layout_of(PROJECTS[project][model])
    role, input_kind, output_kind = EXPECTED[(project, model)]
    assert (layout.role, layout.input and layout.input.kind, layout.output and layout.output.kind) == \
        (role, input_kind, output_kind), layout


def test_yolo_nms_trt_indices_are_not_taken_for_detections():
    """levipereira/triton-server-yolo's yoloNMS config (issue #32's public repositories): the plugin's det_indices
    [100] beside count, boxes, scores and classes was read as a third peer of the boxes and the layout left
    undecided ("no output gives detections"); the indices are set aside and the four EfficientNMS outputs read."""
    layout = layout_of(LEVIPEREIRA["yolov8n"])
    assert layout.output.names == {"boxes": "det_boxes", "scores": "det_scores", "classes": "det_classes",
                                   "count": "num_dets"}, layout.output
    assert layout.output.max_det == 100


def test_postprocessed_ensemble_and_efficient_nms_are_end_to_end_not_raw():
    """Issue #22 item 5: read from the first input only, both passed as raw."""
    ensemble = layout_of(OMARABID["yolov8_ensemble"])
    assert ensemble.role == "e2e" and ensemble.frame == "input" and ensemble.input.imgsz == (640, 640)
    assert ensemble.output.names == {"boxes": "detection_boxes", "scores": "detection_scores",
                                     "classes": "detection_classes", "count": "num_detections"}
    nms = layout_of(LEVIPEREIRA["yolov9-c"])
    assert nms.output.names == {"boxes": "det_boxes", "scores": "det_scores", "classes": "det_classes", "count": "num_dets"}
    assert nms.output.max_det == 100 and (nms.output.box_format, nms.output.box_units) == ("xyxy", "pixels")


def test_nms_outputs_are_matched_by_shapes_and_types_not_names():
    renamed = """name: "m" platform: "tensorrt_plan" max_batch_size: 4
        input { name: "input" data_type: TYPE_FP16 dims: [3, 320, 320] }
        output { name: "a" data_type: TYPE_FP32 dims: [-1] }
        output { name: "b" data_type: TYPE_INT64 dims: [-1] }
        output { name: "c" data_type: TYPE_FP32 dims: [-1, 4] }
        output { name: "d" data_type: TYPE_INT32 dims: [1] }"""
    layout = layout_of(renamed)
    assert layout.role == "e2e" and layout.output.names == {"boxes": "c", "scores": "a", "classes": "b", "count": "d"}
    float_classes = renamed.replace('name: "b" data_type: TYPE_INT64', 'name: "labels" data_type: TYPE_FP32')
    assert layout_of(float_classes).output.names["classes"] == "labels"  # two float peers: the name breaks the tie
    ambiguous = renamed.replace('name: "b" data_type: TYPE_INT64', 'name: "b" data_type: TYPE_FP32')
    layout = layout_of(ambiguous)
    assert layout.role is None and "which is the scores and which the classes cannot be told" in layout.why_no_role()


def test_ultralytics_nms_export_is_rows_in_input_pixels():
    layout = layout_of(ULTRALYTICS_NMS)
    assert (layout.role, layout.input.kind, layout.output.kind, layout.output.max_det) == ("e2e", TENSOR, ROWS, 300)
    assert layout.output.count is None and layout.frame == "input" and layout.input.imgsz == (640, 640)


def test_reference_roles_do_not_change():
    roles = {d.name: read_layout(read_config(d), None, d.name).role
             for d in sorted(paths.REFERENCE_REPO_SOURCES.iterdir()) if (d / "config.pbtxt").is_file()}
    assert roles == {"yolo_raw": "raw", "yolo_onnx": "raw", "yolo_trt": "raw", "yolo_e2e": "e2e", "yolo_ensemble": "e2e",
                     "yolo_preprocess": None, "yolo_postprocess": None}


# -- what an undecidable model says ----------------------------------------------------------------
def _entry(tmp_path: Path, text: str):
    config = parse_config(text)
    write_config(tmp_path / config.name, config)
    (tmp_path / config.name / "1").mkdir()
    return load_entry(tmp_path, config.name)


def test_undecidable_model_says_exactly_what_to_declare(tmp_path):
    entry = _entry(tmp_path, GAMETWIX["yolo_base64"])
    with pytest.raises(NotApplicable) as raised:
        check_role(entry, Manifest(), {})
    message = str(raised.value)
    assert message.startswith("not tested, because its layout is neither raw")
    assert "output 'BBOXS' BYTES [1] is text (JSON detections?): its box format cannot be read" in message
    assert ('[layout.yolo_base64]; json = "BBOXS"; box_format = "xyxy|xywh|cxcywh"; box_units = "pixels|normalized"'
            in message), message
    assert "--model yolo_base64=raw|e2e|skip" in message


def test_declaring_the_json_layout_places_the_model(tmp_path):
    entry = _entry(tmp_path, GAMETWIX["yolo_base64"])
    (tmp_path / "yts.toml").write_text('[layout.yolo_base64]\njson = "BBOXS"\nbox_format = "xywh"\n')
    manifest = load_manifest(tmp_path)
    assert check_role(entry, manifest, {}) == []
    layout = read_layout(entry.config, manifest.layout("yolo_base64"))
    assert (layout.role, layout.input.kind, layout.output.kind, layout.output.box_format) == ("e2e", BASE64, JSON, "xywh")


def test_declared_role_the_layout_contradicts_fails_naming_it(tmp_path):
    entry = _entry(tmp_path, LEVIPEREIRA["yolov9-c"])
    (finding,) = check_role(entry, Manifest(models={"yolov9-c": "raw"}, source="yts.toml"), {})
    assert "declared raw (yts.toml), but its output" in finding.message and "NMS-inside outputs" in finding.message


def test_manifest_layout_tables(tmp_path):
    (tmp_path / "vendor").mkdir()
    good = '[models]\nvendor = "e2e"\n[precision]\nvendor = "fp16"\n[layout.vendor]\ninput = "pixels"\nrows = "OUT"\nbox_units = "normalised"\n'
    (tmp_path / "yts.toml").write_text(good)
    manifest = load_manifest(tmp_path)
    assert manifest.role("vendor") == "e2e" and manifest.precision("vendor") == "fp16"  # the old tables still work
    declared = manifest.layout("vendor")
    assert (declared.input, declared.rows, declared.box_units) == ("pixels", "OUT", "normalized")
    for text, words in (('[layout.vendor]\nbox_format = "yxyx"\n', "box_format = 'yxyx': one of"),
                        ('[layout.vendor]\nboxes = "B"\n', "needs scores and classes too"),
                        ('[layout.vendor]\nrows = "R"\njson = "J"\n', "declares ['rows', 'json'] outputs at once"),
                        ('[layout.vendor]\nnms = "X"\n', "unknown keys ['nms']"),
                        ('[layout.other]\nrows = "R"\n', "declares ['other'], which the repository")):
        (tmp_path / "yts.toml").write_text(text)
        with pytest.raises(ManifestError, match=None) as raised:
            load_manifest(tmp_path)
        assert words in str(raised.value), str(raised.value)


def test_declared_outputs_the_config_lacks_are_named():
    declared = parse_declaration("m", {"rows": "nope"}, "yts.toml")
    layout = layout_of(LEVIPEREIRA["yolov9-c"].replace("yolov9-c", "m"), declared)
    assert layout.role is None and "names outputs ['nope'] that the config does not have" in layout.why_no_role()


# -- decoding every output layout into rows in source pixels ---------------------------------------
def _nms(names=("n", "b", "s", "c"), box_format="xyxy", units="pixels"):
    return OutputLayout(NMS, dict(zip(("count", "boxes", "scores", "classes"), names)), box_format, units)


def test_nms_outputs_decode_to_rows_past_the_count_ignored():
    outputs = {"n": np.array([[2]], np.int32), "b": np.array([[[10, 20, 30, 60], [0, 0, 5, 5], [1, 1, 2, 2]]], np.float32),
               "s": np.array([[0.9, 0.5, 0.4]], np.float32), "c": np.array([[3, 1, 0]], np.int32)}
    rows = to_source_rows(_nms(), outputs, (100, 100))
    np.testing.assert_allclose(rows, [[10, 20, 30, 60, 0.9, 3], [0, 0, 5, 5, 0.5, 1]], rtol=1e-6)
    xywh = to_source_rows(_nms(box_format="xywh"), outputs, (100, 100))
    np.testing.assert_allclose(xywh[0, :4], [10, 20, 40, 80])
    centre = to_source_rows(_nms(box_format="cxcywh"), outputs, (100, 100))
    np.testing.assert_allclose(centre[0, :4], [-5, -10, 25, 50])


def test_zero_padded_rows_without_a_count_are_dropped():
    rows = np.zeros((1, 300, 6), np.float32)
    rows[0, 0] = [1, 2, 3, 4, 0.8, 0]
    rows[0, 1] = [1, 2, 3, 4, 0.7, -1]  # the reference's -1 padding
    assert as_written(OutputLayout(ROWS, {"rows": "o"}), {"o": rows}).tolist() == [[1, 2, 3, 4, pytest.approx(0.8), 0]]


def test_normalised_boxes_scale_by_the_image_the_model_saw_and_tensor_frames_are_restored():
    layout = OutputLayout(ROWS, {"rows": "o"}, box_units="normalized")
    source = to_source_rows(layout, {"o": np.array([[0.1, 0.2, 0.5, 1.0, 0.9, 2]], np.float32)}, (200, 400))
    np.testing.assert_allclose(source[0, :4], [40, 40, 200, 200], rtol=1e-6)
    _, meta = LETTERBOX(np.zeros((200, 400, 3), np.uint8), 320)  # gain 0.8, 80 px padding top and bottom
    canvas = to_source_rows(OutputLayout(ROWS, {"rows": "o"}), {"o": np.array([[32, 112, 160, 240, 0.9, 1]], np.float32)},
                            (200, 400), meta)
    np.testing.assert_allclose(canvas[0, :4], [40, 40, 200, 200], rtol=1e-5)


def test_json_detections_decode_with_the_declared_box_format():
    text = json.dumps([{"bbox": ["10", "20", "30", "40"], "score": "0.75", "class": "2"}])
    layout = OutputLayout(JSON, {"json": "BBOXS"}, box_format="xywh")
    rows = to_source_rows(layout, {"BBOXS": np.array([[text.encode()]], dtype=object)}, (100, 100))
    np.testing.assert_allclose(rows, [[10, 20, 40, 60, 0.75, 2]])
    with pytest.raises(ValueError, match="lacks a 4-number box"):
        to_source_rows(layout, {"BBOXS": np.array([json.dumps([{"x": 1}]).encode()], dtype=object)}, (100, 100))


# -- the clients built on layouts ------------------------------------------------------------------
def test_client_sends_each_input_kind_as_it_wants_it():
    import tritonclient.http as httpclient

    from harness.protocol.models import sample_image
    from harness.vision.served import EndToEndClient, end_to_end_model

    image = sample_image(size=(96, 128))
    client = httpclient.InferenceServerClient("127.0.0.1:9")  # never called: request() builds, it does not send
    odlab = end_to_end_model(parse_config(ODLAB["ensemble"]))
    array, datatype, meta, source = EndToEndClient(client, odlab).request(image)
    assert (array.shape, array.dtype, datatype, meta, source) == ((1, 96, 128, 3), np.uint8, "UINT8", None, (96, 128))
    nms = end_to_end_model(parse_config(OMARABID["yolov8_ensemble"]))
    array, datatype, meta, source = EndToEndClient(client, nms).request(image)
    assert (array.shape, array.dtype, datatype, meta.output_shape) == ((1, 3, 640, 640), np.float32, "FP32", (640, 640))
    declared = Manifest(layouts={"yolo_base64": parse_declaration("yolo_base64", {"json": "BBOXS"}, "yts.toml")})
    b64 = end_to_end_model(parse_config(GAMETWIX["yolo_base64"]), manifest=declared)
    array, datatype, _, _ = EndToEndClient(client, b64).request(image)
    assert datatype == "BYTES" and array.shape == (1, 1) and base64.b64decode(array.reshape(-1)[0]) == image


def test_protocol_views_take_their_input_and_encoding_from_the_layout():
    from harness.protocol.models import ModelView, Port, good_array, image_request, sample_image

    def view(text: str, inputs, outputs):
        config = parse_config(text)
        return ModelView(config.name, ("1",), inputs, outputs, config.max_batch_size, "", None, read_layout(config))

    b64 = view(GAMETWIX["yolo_base64"], (Port("IMAGE_BASE64", "BYTES", (-1, 1)),), (Port("BBOXS", "BYTES", (-1, 1)),))
    assert b64.role == "image" and not b64.detects  # JSON undeclared: not known to detect
    sent = good_array(b64, batch=2).reshape(-1)
    assert [base64.b64decode(item)[:2] for item in sent] == [b"\xff\xd8"] * 2  # base64 of JPEG bytes
    raw_bytes = view(ODLAB["yolov_preprocess"], (Port("INPUT_0", "UINT8", (-1, -1)),), (Port("OUTPUT_0", "FP32", (-1, 3, 640, 640)),))
    assert raw_bytes.role == "image"
    request = image_request(raw_bytes, [sample_image()])
    assert request.inputs[0].datatype == "UINT8" and request.inputs[0].shape == (1, len(sample_image()))
    nms = view(LEVIPEREIRA["yolov9-c"], (Port("images", "FP32", (-1, 3, 640, 640)),), ())
    assert nms.role == "tensor" and nms.detects
    pixels = view(ODLAB["ensemble"], (Port("INPUT", "UINT8", (-1, -1, -1, -1)),), (Port("OUTPUT", "FP32", (-1, -1, -1, 6)),))
    assert pixels.role == "tensor" and pixels.detects


def fixture_builder():
    """fixtures/layouts/build.py as a module."""
    return load_module(paths.FIXTURES / "layouts" / "build.py")


def test_fixture_repository_models_are_end_to_end_with_their_geometry(tmp_path):
    build = fixture_builder()
    dummy = tmp_path / "model.onnx"
    dummy.write_bytes(b"")  # configs and layouts only: no model runs here
    repo = build.build(tmp_path / "models", dummy, 320)
    from harness.vision.served import end_to_end_models

    found = {m.name: m for m in end_to_end_models(repo, load_manifest(repo))}
    assert sorted(found) == ["yolo_nms", "yolo_nms_xywh", "yolo_nms_xywh_declared", "yolo_pixels", "yolo_pixels_normalized"]
    assert all(m.imgsz == (320, 320) for m in found.values())
    assert found["yolo_nms"].layout.output.kind == NMS and found["yolo_pixels"].layout.input.kind == PIXELS
    assert found["yolo_nms_xywh"].layout.output.box_format == "xyxy" and not found["yolo_nms_xywh"].layout.output.how
    declared = found["yolo_nms_xywh_declared"].layout.output
    assert declared.box_format == "xywh" and "declared in" in declared.how


# -- NMS-inside outputs without a count, segmentation heads ---------------------------------------
def test_nms_outputs_without_a_count_read_as_padded_not_as_counted():
    """EfficientNMS outputs with no num_dets, and Ultralytics-style rows beside a float [1] that is not a
    count (a timing): no count is read, the description says so, and -1 / zero padding rows are empty."""
    nms = layout_of(LEVIPEREIRA["yolov9-c"].replace("yolov9-c", "m").replace(
        'output { name: "num_dets" data_type: TYPE_INT32 dims: [1] }', ""))
    assert nms.role == "e2e" and nms.output.kind == NMS and nms.output.count is None
    assert "no count (rows with score <= 0 or class < 0 are padding)" in nms.describe()
    outputs = {"det_boxes": np.array([[[10, 20, 30, 60], [0, 0, 0, 0], [-1, -1, -1, -1]]], np.float32),
               "det_scores": np.array([[0.9, 0, -1]], np.float32), "det_classes": np.array([[3, 0, -1]], np.int32)}
    np.testing.assert_allclose(to_source_rows(nms.output, outputs, (100, 100)), [[10, 20, 30, 60, 0.9, 3]], rtol=1e-6)
    rows = layout_of(ULTRALYTICS_NMS + '\n    output { name: "latency_ms" data_type: TYPE_FP32 dims: [1] }')
    assert rows.output.kind == ROWS and rows.output.count is None, rows.describe()
    counted = layout_of(ULTRALYTICS_NMS + '\n    output { name: "num_dets" data_type: TYPE_FP32 dims: [-1, 1] }')
    assert counted.output.count == "num_dets" and "no count" not in counted.describe()


SEGMENTATION = """name: "yolo_seg" platform: "onnxruntime_onnx" max_batch_size: 0
    input { name: "images" data_type: TYPE_FP32 dims: [1, 3, 640, 640] }
    output { name: "output0" data_type: TYPE_FP32 dims: [1, 300, 38] }
    output { name: "output1" data_type: TYPE_FP32 dims: [1, 32, 160, 160] }"""


def test_segmentation_rows_are_detections_from_their_first_six_columns_masks_not_tested():
    """Ultralytics' YOLOv8-seg nms=True export: rows [300, 6 + 32 mask coefficients] beside prototypes
    [32, 160, 160]: end-to-end, not a raw head with 296 classes; decoded from the first 6 columns."""
    layout = layout_of(SEGMENTATION)
    assert (layout.role, layout.output.kind, layout.output.masks) == ("e2e", ROWS, 32)
    assert layout.output.names == {"rows": "output0", "prototypes": "output1"}
    assert layout.output.read == ["output0"]  # the prototypes are not requested: masks are not tested
    assert "masks not tested (32 mask coefficients with prototypes 'output1')" in layout.describe()
    rows = np.zeros((1, 300, 38), np.float32)
    rows[0, 0, :6] = [10, 20, 30, 60, 0.9, 3]
    rows[0, 0, 6:] = 0.5  # mask coefficients: never read as a score or a class
    rows[0, 1, :6] = [-1, -1, -1, -1, -1, -1]
    np.testing.assert_allclose(to_source_rows(layout.output, {"output0": rows}, (100, 100)), [[10, 20, 30, 60, 0.9, 3]])
    raw = layout_of(SEGMENTATION.replace("[1, 300, 38]", "[1, 116, 8400]"))
    assert (raw.role, raw.output.kind, raw.output.masks) == ("raw", RAW, 32), raw.describe()
    assert raw_detection_rows(np.zeros((1, 116, 8400)), raw.output).shape == (1, 84, 8400)


def test_a_raw_segmentation_candidate_is_decoded_without_its_mask_rows():
    """The accuracy suite's raw candidate over fixtures/config/segmentation_head's yolo_seg ONNX (4 + 80 + 32
    rows beside 32 prototypes), run by ONNX Runtime: the decoder gets 4 + 80 rows."""
    from harness.accuracy.candidates import RawCandidate
    from harness.engines.ort import OrtEngine

    model = paths.FIXTURES / "config" / "segmentation_head" / "yolo_seg"
    layout = read_layout(read_config(model), None, "yolo_seg")
    candidate = RawCandidate("yolo_seg", "fp32", OrtEngine(model / "1" / "model.onnx"), output=layout.output)
    outputs = candidate.infer(np.zeros((1, 3, 320, 320), np.float32))
    assert outputs["output0"].shape == (1, 84, 100) and outputs["output1"].shape == (1, 32, 10, 10)
