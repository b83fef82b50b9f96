"""suites/letterbox/test_client_inputs.py and its catalogue (harness.vision.catalogue, harness.vision.client_inputs):
the catalogue's entries decode as the contract says (EXIF transposed back to the upright image, 16-bit scaled,
alpha dropped), each has objects the reference finds and each mistake it names is one the judge can tell (for
the partial-alpha entries: each treatment of alpha is named nearest first); through a real server the reference
yolo_e2e / yolo_ensemble pass every entry, and fixtures/letterbox/client_inputs' orientation_blind,
channel_blind and unpremultiplied deployments fail the entries they get wrong, naming entry and cause.

Speed: the catalogue units ~12 s (the reference detector on 19 entries and their alpha treatments); each served
run starts a Triton server and sends the 19 entries per model (~20-40 s on two shared cores). They need the
committed reference model."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from PIL import Image

from harness import paths
from harness.vision.catalogue import NAMES, catalogue, entry
from harness.accuracy.profile import load_profile
from harness.vision.catalogue import ALPHA_DROPPED, ALPHA_TREATMENTS
from harness.vision.client_inputs import Gates, judge, objects
from tests.conftest import derive_served, load_module, run_suite_file

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: E402,F401
import harness.vision.letterbox  # noqa: E402,F401

SUITE_FILE = paths.PROJECT_ROOT / "suites" / "letterbox" / "test_client_inputs.py"
FIXTURES = paths.FIXTURES / "letterbox" / "client_inputs"
FP32 = Gates("fp32", load_profile("default").section("boxes", "fp32"))
ALPHA_ENTRIES = ("gray-LA", "gray-LA-half", "rgba", "rgba-half")


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
    assert (modes["gray-LA-half"], modes["rgba-half"]) == ("LA", "RGBA")
    alphas = {name: np.asarray(Image.open(io.BytesIO(entry(name).encoded)).getchannel("A")) for name in ALPHA_ENTRIES}
    assert alphas["rgba"].min() == 0 and alphas["rgba"].max() == 255 and set(np.unique(alphas["rgba-half"])) == {128}
    assert [e.name for e in catalogue() if e.gated] == list(ALPHA_ENTRIES)


def test_partial_alpha_is_dropped_and_each_treatment_differs():
    """The contract drops alpha: the colour as stored. The treatments change it (half alpha: over black the
    colour halves, un-premultiplied it doubles)."""
    colour = entry("rgba-half").displayed().astype(int)
    assert np.array_equal(colour, entry("rgba").displayed())
    assert np.array_equal(entry("gray-LA-half").displayed(), entry("gray-L").displayed())
    treated = {words: pixels().astype(int) for words, pixels in entry("rgba-half").mistakes.items()}
    assert set(treated) == set(ALPHA_TREATMENTS.values())
    black, white = treated[ALPHA_TREATMENTS["black"]], treated[ALPHA_TREATMENTS["white"]]
    assert np.abs(black - np.rint(colour * 128 / 255)).max() <= 1 and np.abs(white - black - 127).max() <= 1
    assert np.array_equal(treated[ALPHA_TREATMENTS["unpremultiplied"]], np.clip(np.rint(colour * 255 / 128), 0, 255))


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
        assert judge(item, reference(item.displayed()), reference, "ref", FP32) is None
    for name in ("exif-6", "exif-3", "png-16bit"):
        item = entry(name)
        cause, pixels = next(iter(item.mistakes.items()))
        failure = judge(item, reference(pixels()), reference, "m")
        assert failure is not None and cause in failure, failure
        assert f"client input {name} " in failure


def test_every_alpha_treatment_fails_the_fp32_gates_and_is_named_nearest(reference):
    """On the reference's own answer to each treatment's pixels, the gated judge fails and lists that treatment
    first, the contract's (alpha dropped) later: the failure says what was done with alpha."""
    for name in ALPHA_ENTRIES:
        item = entry(name)
        for treatment, pixels in item.mistakes.items():
            failure = judge(item, reference(pixels()), reference, "m", FP32)
            assert failure is not None, (name, treatment)
            assert f"m, client input {name} " in failure and "within the fp32 box gates" in failure, failure
            nearest = failure.split("treatment, nearest first: ")[1]
            assert nearest.startswith(f"{treatment} ["), failure
            assert nearest.split("]")[0].endswith("0 extra, mean IoU 1.0000, score moved by up to 0.0000"), failure
            assert ALPHA_DROPPED in nearest, failure


def test_alpha_treatments_are_matched_at_the_gates_match_iou(reference):
    """The distances to each treatment match boxes at the precision's match_iou, as its gates do: a gate that
    matches nothing below IoU 1.01 matches none of the treatment's own boxes, where fp32's (0.5) matches all."""
    item = entry("rgba-half")
    treatment, pixels = next(iter(item.mistakes.items()))
    rows = reference(pixels())
    words = {}
    for gates in (FP32, Gates("fp32", {**FP32.thresholds, "match_iou": 1.01})):
        nearest = judge(item, rows, reference, "m", gates).split("treatment, nearest first: ")[1]
        words[gates.thresholds["match_iou"]] = nearest.split(f"{treatment} [")[1].split(" boxes matched")[0]
    assert words[0.5] == f"{len(rows)} of {len(rows)}" and words[1.01] == f"0 of {len(rows)}", words


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
    assert failed == {"png-16bit", "gray-LA", "gray-LA-half"}, output[-6000:]
    assert "client input png-16bit (16-bit grayscale PNG (mode I;16)): 0 of 3 objects found" in output
    assert "16-bit samples cast to 8 bits (their low byte) instead of scaled (their high byte)" in output
    assert "client input gray-LA (grayscale + alpha PNG" in output and "the request failed" in output


def test_unpremultiplied_deployment_fails_every_partial_alpha_entry(pytester, tmp_path, reference_repository):
    """Colour divided by alpha: the objects are still found (the old judge passed it), the boxes and scores move
    beyond the FP32 gates; the failure names the un-premultiplied treatment as the nearest. The opaque and
    alpha-less entries pass."""
    output = run_suite(pytester, derived(reference_repository, "unpremultiplied", tmp_path / "models")).stdout.str()
    failed = failures(output)
    assert failed == set(ALPHA_ENTRIES), output[-6000:]
    assert ("client input rgba-half (RGBA PNG (alpha 128)): the answer is not the reference pipeline's on the "
            f"decoded pixels ({ALPHA_DROPPED}) within the fp32 box gates: ") in output, output[-6000:]
    unpremultiplied = ALPHA_TREATMENTS["unpremultiplied"]
    for name in ALPHA_ENTRIES:
        line = next(line for line in output.splitlines() if f"client input {name} (" in line and "nearest first" in line)
        assert line.split("nearest first: ")[1].startswith(unpremultiplied), line


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
