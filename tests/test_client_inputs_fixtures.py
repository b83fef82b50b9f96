"""suites/letterbox/test_client_inputs.py and its catalogue (harness.vision.catalogue, harness.vision.client_inputs):
the catalogue's entries decode as the contract says (EXIF transposed back to the upright image, 16-bit scaled),
each has objects the reference finds and each mistake it names is one the judge can tell; through a real
server the reference yolo_e2e / yolo_ensemble pass every entry, and fixtures/letterbox/client_inputs'
orientation_blind and channel_blind deployments fail the entries they get wrong, naming entry and cause.

Speed: the catalogue units ~10 s (the reference detector on 17 entries); each served run starts a Triton server
and sends the 17 entries per model (~20-40 s on two shared cores). They need the committed reference model."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from PIL import Image

from harness import paths
from harness.vision.catalogue import NAMES, catalogue, entry
from harness.vision.client_inputs import judge, objects
from tests.conftest import derive_served, load_module, run_suite_file

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: E402,F401
import harness.vision.letterbox  # noqa: E402,F401

SUITE_FILE = paths.PROJECT_ROOT / "suites" / "letterbox" / "test_client_inputs.py"
FIXTURES = paths.FIXTURES / "letterbox" / "client_inputs"


@pytest.fixture(scope="module")
def reference():
    from harness.engines.artifacts import REFERENCE_MODEL
    from harness.vision.pipeline import LocalPipeline

    if not REFERENCE_MODEL.exists():
        pytest.skip(f"needs the reference detector {REFERENCE_MODEL}")
    pipeline = LocalPipeline(REFERENCE_MODEL)

    def rows(pixels):
        detections, num = pipeline([pixels])
        return detections[0, : int(num[0])]

    return rows


# -- the catalogue ------------------------------------------------------------------------------
def test_catalogue_names_and_sizes():
    assert tuple(e.name for e in catalogue()) == NAMES
    shapes = {e.name: e.displayed().shape[:2] for e in catalogue()}
    assert shapes["small-32x20"] == (20, 32) and shapes["large-4000x3000"] == (3000, 4000)
    assert shapes["wide-2000x200"] == (200, 2000) and shapes["tall-200x2000"] == (2000, 200)
    modes = {e.name: Image.open(io.BytesIO(e.encoded)).mode for e in catalogue()}
    assert (modes["gray-L"], modes["gray-LA"], modes["rgba"], modes["png-16bit"], modes["cmyk"]) == \
        ("L", "LA", "RGBA", "I;16", "CMYK")


def test_every_exif_orientation_displays_the_upright_image():
    upright = entry("exif-1").displayed().astype(int)
    for tag in range(2, 9):
        item = entry(f"exif-{tag}")
        assert Image.open(io.BytesIO(item.encoded)).getexif()[0x0112] == tag
        shown = item.displayed().astype(int)
        assert shown.shape == upright.shape, item.name
        assert np.abs(shown - upright).mean() < 3, f"{item.name} does not display the upright image (JPEG noise only)"


def test_16bit_png_decodes_to_its_high_byte_not_clipped_white():
    shown = entry("png-16bit").displayed()
    gray = entry("gray-L").displayed()
    assert np.array_equal(shown, gray), "16-bit samples must be scaled to their high byte (the 8-bit picture)"


def test_every_entry_has_objects_and_every_mistake_is_told_apart(reference):
    for item in catalogue():
        truth = objects(reference, item.displayed())
        assert len(truth) >= 3, f"{item.name}: the reference finds {len(truth)} objects"
        assert judge(item, reference(item.displayed()), reference, "ref") is None
    for name in ("exif-6", "exif-3", "png-16bit"):
        item = entry(name)
        cause, pixels = next(iter(item.mistakes.items()))
        failure = judge(item, reference(pixels()), reference, "m")
        assert failure is not None and cause in failure, failure
        assert f"client input {name} " in failure


# -- through a real server ----------------------------------------------------------------------
def run_suite(pytester: pytest.Pytester, repo, *args: str) -> pytest.RunResult:
    return run_suite_file(pytester, SUITE_FILE, "-q", f"--repo={repo}", *args)


def derived(reference_repository, variant: str, out):
    return derive_served(reference_repository, variant, out, FIXTURES)


def failures(output: str) -> set[str]:
    """The entries failed by yolo_e2e, from pytest's short summary."""
    return set(re.findall(r"FAILED \S*::test_client_input_detected_as_displayed\[yolo_e2e-([\w-]+)\]", output))


def test_reference_end_to_end_models_pass_every_entry(pytester, reference_repository):
    result = run_suite(pytester, reference_repository)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    assert result.parseoutcomes().get("passed") == 2 * len(NAMES), output[-4000:]  # yolo_e2e and yolo_ensemble


def test_orientation_blind_deployment_fails_every_rotated_entry(pytester, tmp_path, reference_repository):
    """Its plain `convert("RGB")` also clips a 16-bit PNG to white: that entry fails too, naming the clip."""
    output = run_suite(pytester, derived(reference_repository, "orientation_blind", tmp_path / "models")).stdout.str()
    failed = failures(output)
    assert failed == {f"exif-{tag}" for tag in range(2, 9)} | {"png-16bit"}, output[-6000:]
    assert "16-bit samples clipped to 255 (a plain convert) instead of scaled (their high byte)" in output
    assert ("client input exif-6 (JPEG 320x240 stored rotated 90 CW (EXIF orientation 6), displayed 240x320): "
            "0 of 3 objects found at the displayed position") in output, output[-6000:]
    assert "boxes match the stored (unrotated) pixels -- the deployment ignores EXIF orientation" in output


def test_channel_blind_deployment_fails_16bit_and_la(pytester, tmp_path, reference_repository):
    output = run_suite(pytester, derived(reference_repository, "channel_blind", tmp_path / "models")).stdout.str()
    failed = failures(output)
    assert failed == {"png-16bit", "gray-LA"}, output[-6000:]
    assert "client input png-16bit (16-bit grayscale PNG (mode I;16)): 0 of 3 objects found" in output
    assert "16-bit samples cast to 8 bits (their low byte) instead of scaled (their high byte)" in output
    assert "client input gray-LA (grayscale + alpha PNG" in output and "the request failed" in output


def test_pixel_and_tensor_models_take_only_the_size_entries(pytester, tmp_path):
    """fixtures/layouts' correct models at 320: yolo_pixels (UINT8 pixels in) and yolo_nms (a tensor in) cannot
    decode an image wrong -- the encoding entries are not applicable to them, the sizes are judged and pass."""
    builder = load_module(paths.FIXTURES / "layouts" / "build.py")
    try:
        onnx = builder.reference_onnx(320)
    except FileNotFoundError as error:
        pytest.skip(f"needs the reference model: {error}")
    repo = builder.build(tmp_path / "models", onnx, 320, models=builder.CORRECT)
    result = run_suite(pytester, repo, "-v", "-v")  # run_suite says -q: two -v make one
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    verdicts = dict(re.findall(r"::test_client_input_detected_as_displayed\[(\S+)\] (PASSED|SKIPPED)", output))
    # at 320 the 1:10 frame's objects shrink to ~5 px: the reference finds none, so it is not judged
    sizes = [n for n in NAMES if not entry(n).encoding_specific and n != "tall-200x2000"]
    for model in ("yolo_pixels", "yolo_nms"):
        for name in NAMES:
            expected = "PASSED" if name in sizes else "SKIPPED"
            assert verdicts.get(f"{model}-{name}") == expected, (model, name, verdicts, output[-4000:])
    assert "not applicable: yolo_pixels takes pixels input, not encoded images: exif-6" in output, output[-4000:]
    assert "yolo_nms: at its input size 320x320 the reference finds no object on tall-200x2000" in output
