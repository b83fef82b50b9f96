"""Client inputs as clients really send them (harness.vision.catalogue): EXIF orientations 1-8, grayscale, LA and
RGBA PNG, 16-bit PNG, CMYK JPEG, 32x20 and 4000x3000 images, 10:1 and 1:10 frames -- each sent to every
end-to-end model and judged by its detections against the reference pipeline on the entry's decoded,
EXIF-transposed RGB pixels (README "Client inputs"), not by status alone; the partial-alpha entries (gated) box for
box within the box gates of the model's precision, the reference run with the model's own conf, iou and max_det.
A model fed decoded pixels or a tensor cannot get an encoding wrong: for it the encoding entries are not
applicable, the sizes still count."""

from __future__ import annotations

import pytest

from harness.repository.layouts import BASE64, ENCODED
from harness.repository.sizing import human, request_budget
from harness.verdicts import not_applicable
from harness.vision.catalogue import NAMES, entry
from harness.vision.client_inputs import Gates, judge, objects
from test_served import e2e_model, pytest_generate_tests  # noqa: F401  (the served models, parametrized)

pytestmark = pytest.mark.server


@pytest.fixture(scope="session")
def reference_rows():
    """(imgsz, conf, iou, max_det) -> (pixels -> the reference pipeline's rows with those settings), cached by
    the pixels' bytes: every model is judged on the same pixels, by the reference at its own input size and
    post-processing (one ONNX Runtime session of the reference for them all)."""
    import onnxruntime

    from harness.engines.artifacts import REFERENCE_MODEL
    from harness.vision.pipeline import LocalPipeline

    if not REFERENCE_MODEL.exists():
        pytest.skip(f"not tested, because the reference detector {REFERENCE_MODEL} is not here")
    session = onnxruntime.InferenceSession(str(REFERENCE_MODEL), providers=["CPUExecutionProvider"])
    pipelines, cache = {}, {}

    def at(imgsz, conf, iou, max_det):
        settings = (imgsz, conf, iou, max_det)

        def rows(pixels):
            key = (settings, pixels.shape, hash(pixels.tobytes()))
            if key not in cache:
                if settings not in pipelines:
                    pipelines[settings] = LocalPipeline(session, imgsz=imgsz, conf=conf, iou=iou, max_det=max_det)
                detections, num = pipelines[settings]([pixels])
                cache[key] = detections[0, : int(num[0])]
            return cache[key]

        return rows

    return at


@pytest.fixture(scope="session")
def served_settings(pytestconfig, repository, manifest):
    """model -> (its conf / iou / max_det; the box gates of its precision), as the accuracy suite reads a served
    model (harness.accuracy.served.served_settings: its completed config, in the thresholds profile of --profile),
    read once per model."""
    from harness.accuracy.profile import load_profile
    from harness.accuracy.served import served_settings as settings_of

    profile, found = load_profile(pytestconfig.getoption("--profile")), {}

    def of(model) -> tuple[dict, Gates]:
        if model.name not in found:
            settings = settings_of(repository, model.name, manifest, profile.eval)
            found[model.name] = (settings.thresholds, Gates(settings.precision, profile.section("boxes", settings.precision)))
        return found[model.name]

    return of


@pytest.mark.parametrize("entry_name", NAMES)
def test_client_input_detected_as_displayed(e2e_model, entry_name, reference_rows, served_settings):
    model, client = e2e_model
    item = entry(entry_name)
    if item.encoding_specific and model.layout is not None and model.layout.input.kind not in (ENCODED, BASE64):
        not_applicable(f"{model.name} takes {model.layout.input.kind} input, not encoded images: "
                       f"{entry_name} ({item.what}) is decoded by the client, not by the deployment")
    settings, gates = served_settings(model)
    reference = reference_rows(model.imgsz, settings["conf"], settings["iou"], settings["max_det"])
    if not len(objects(reference, item.displayed())):
        not_applicable(f"{model.name}: at its input size {model.imgsz[0]}x{model.imgsz[1]} the reference finds no "
                       f"object on {entry_name} ({item.what}): nothing to judge detections by")
    array = client.request(item.encoded)[0]
    size = sum(len(v) for v in array.reshape(-1)) if array.dtype == object else array.nbytes
    if size > request_budget():
        not_applicable(f"{model.name}: {entry_name} would be a {human(size)} request, above the "
                       f"{human(request_budget())} bound ($YTS_MAX_REQUEST_BYTES)")
    try:
        rows = client.detect(item.encoded)
    except Exception as error:  # tritonclient's InferenceServerException, or an answer that cannot be read
        pytest.fail(f"{model.name}, client input {entry_name} ({item.what}): the request failed: {error}",
                    pytrace=False)
    failure = judge(item, rows, reference, model.name, gates)
    assert failure is None, failure
