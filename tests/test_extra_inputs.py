"""`[inputs.MODEL]` in yts.toml (harness.repository.extra_inputs): inputs beside the image that no config can
say how to fill. `fixtures/layouts`' affine pipelines (JPEG bytes + the letterbox affine [2, 3], mapped back
through its inverse; fixtures/third_party's model otherwise) in both directions:
- undeclared: its checks (accuracy, the config suite's role) are "not tested", the message showing the
  [inputs.MODEL] lines that would fill it;
- declared right (affine = "letterbox_affine"): served boxes, mAP, served-vs-local, batched answers, the served
  letterbox property and the protocol suite pass, the affine of each image travelling with it;
- declared wrong (letterbox_inverse where the forward matrix is expected): the accuracy suite fails its
  boxes, naming the declaration the boxes depend on;
- an entry naming an input the model lacks, or one its dims / data type cannot hold: a usage error at start
  naming the entry, what the config has and what was declared.

Speed: the offline tests are instant; the usage-error run ~3 s (no server); one served run of the accuracy
suite (8 images at 320), the served letterbox property and the protocol suite over the three models, ~60 s on
two cores beside a CI run (62 s measured)."""

from __future__ import annotations

import numpy as np
import pytest

from harness import paths
from harness.repository.manifest import ManifestError, load_manifest

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: F401
import harness.vision.letterbox  # noqa: F401
from tests.conftest import run_suite_file
from tests.test_layouts_served import IMGSZ, QUICK, builder, onnx  # noqa: F401 (the layouts fixture's builder, its ONNX)

ROOT = paths.PROJECT_ROOT


@pytest.fixture(scope="module")
def repo(builder, onnx, tmp_path_factory):
    return builder.build(tmp_path_factory.mktemp("affine") / "models", onnx, IMGSZ, models=builder.AFFINE)


def _layout(repo, name: str, manifest=None):
    from harness.accuracy.served import model_layout
    from harness.checks.model import completed_config

    return model_layout(completed_config(repo / name), manifest or load_manifest(repo), name)


# -- offline ----------------------------------------------------------------------------------------
def test_undeclared_extra_input_has_no_role_and_says_what_to_declare(repo):
    layout = _layout(repo, "yolo_affine_undeclared")
    assert layout.role is None and [p.name for p in layout.unfilled] == ["affine"]
    assert "also needs [\"'affine' FP32 [2, 3]\"], which the suites cannot infer" in layout.why_no_role()
    assert layout.what_to_declare().startswith(
        '[inputs.yolo_affine_undeclared]; affine = "letterbox_affine|letterbox_inverse"  # FP32 [2, 3]'), layout.what_to_declare()
    declared = _layout(repo, "yolo_affine")
    assert declared.role == "e2e" and declared.input.name == "image" and not declared.unfilled


def test_letterbox_transforms_are_the_harness_letterbox_of_that_image(repo):
    from harness.vision.letterbox import LETTERBOX

    forward = _layout(repo, "yolo_affine").extra_values((480, 640), IMGSZ)["affine"]
    inverse = _layout(repo, "yolo_affine_swapped").extra_values((480, 640), IMGSZ)["affine"]
    assert forward.dtype == np.float32 and forward.shape == (2, 3)
    meta = LETTERBOX.geometry((480, 640), IMGSZ)
    box = np.array([[100.0, 50.0, 300.0, 400.0]])
    corners = box.reshape(-1, 2)
    projected = (corners @ forward[:, :2].T + forward[:, 2]).reshape(-1, 4)
    np.testing.assert_allclose(projected, LETTERBOX.project_boxes(box, meta), atol=1e-4)
    back = (projected.reshape(-1, 2) @ inverse[:, :2].T + inverse[:, 2]).reshape(-1, 4)
    np.testing.assert_allclose(back, box, atol=1e-3)


def test_the_operations_checks_requests_carry_the_declared_values(repo):
    """The requests the operations suite (memory, growth, co-tenancy) sends come from
    harness.load.RepositoryPayloads, and `yts load --repo`'s read the repository's yts.toml: with the model's
    layout, the declared input holds the letterbox affine of the encoded image sent, in every row of a batch;
    without it, arbitrary numbers, as before #32 item 6."""
    from harness.load import RepositoryPayloads
    from harness.load.cli import _payload
    from harness.load.payload import ENCODED_SIZE
    from harness.repository.config import read_config

    expected = _layout(repo, "yolo_affine").extra_values(ENCODED_SIZE, IMGSZ)["affine"]
    declared = RepositoryPayloads(repo, {"yolo_affine": _layout(repo, "yolo_affine")})("yolo_affine", batch=2)
    affine = next(t.array for t in declared.tensors if t.name == "affine")
    assert affine.shape == (2, 2, 3)
    np.testing.assert_allclose(affine, np.broadcast_to(expected, (2, 2, 3)))
    plain = RepositoryPayloads(repo)("yolo_affine", batch=2)
    assert not np.allclose(next(t.array for t in plain.tensors if t.name == "affine"), affine)
    sent = next(t.array for t in _payload(read_config(repo / "yolo_affine"), repo).tensors if t.name == "affine")
    np.testing.assert_allclose(sent, expected[None])


def test_a_constant_takes_the_configs_data_type_and_shape(repo, tmp_path):
    manifest = tmp_path / "yts.toml"
    manifest.write_text("[inputs.yolo_affine]\naffine = [1, 0, 8, 0, 1, 4]\n")
    values = _layout(repo, "yolo_affine", load_manifest(repo, manifest)).extra_values((480, 640), IMGSZ)
    np.testing.assert_array_equal(values["affine"], np.array([[1, 0, 8], [0, 1, 4]], dtype=np.float32))
    assert values["affine"].dtype == np.float32


@pytest.mark.parametrize("table, expected", [
    ('[inputs.yolo_affine]\nscale = "letterbox_affine"\n',
     "[inputs.yolo_affine] scale = \"letterbox_affine\": the model has no input 'scale' (its inputs: "
     "[\"'image' BYTES [1]\", \"'affine' FP32 [2, 3]\"])"),
    ('[inputs.yolo_affine]\naffine = "image_hw"\n',
     "[inputs.yolo_affine] affine = \"image_hw\": image_hw gives dims [2]; the config has 'affine' FP32 [2, 3]"),
    ("[inputs.yolo_affine]\naffine = [1.0, 2.0, 3.0, 4.0]\n",
     "[inputs.yolo_affine] affine = [1.0, 2.0, 3.0, 4.0]: the config has 'affine' FP32 [2, 3]: 4 value(s) of shape [4] "
     "cannot fill dims [2, 3]"),
    ('[inputs.yolo_affine]\naffine = "letterbox"\n', "the config has 'affine' FP32 [2, 3]: a FP32 input takes numbers, "
     "not text 'letterbox'"),
])
def test_a_declaration_the_config_cannot_hold_is_refused_naming_it(repo, tmp_path, table, expected):
    manifest = tmp_path / "yts.toml"
    manifest.write_text(table)
    with pytest.raises(ManifestError) as error:
        load_manifest(repo, manifest)
    assert expected in str(error.value), str(error.value)


# -- served ----------------------------------------------------------------------------------------
def test_unknown_input_stops_the_run_at_start(pytester, repo):
    manifest = pytester.path / "yts.toml"
    manifest.write_text('[inputs.yolo_affine]\naffine = "letterbox_affine"\nletterbox = "letterbox_inverse"\n')
    pytester.chdir()
    result = run_suite_file(pytester, ROOT / "suites" / "protocol", "--repo", str(repo), "--manifest", str(manifest), timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    assert "[inputs.yolo_affine] letterbox = \"letterbox_inverse\": the model has no input 'letterbox'" in result.stderr.str(), \
        result.stderr.str()[-3000:]


@pytest.mark.server
def test_declared_inputs_travel_with_each_image_in_both_directions(pytester, repo, onnx):
    pytester.chdir()
    candidates = [a for name in ("yolo_affine", "yolo_affine_swapped", "yolo_affine_undeclared")
                  for a in ("--accuracy-candidate", f"served:{name}")]
    result = run_suite_file(pytester, ROOT / "suites" / "accuracy", str(ROOT / "suites" / "letterbox" / "test_served.py"),
                            str(ROOT / "suites" / "protocol"), str(ROOT / "suites" / "config" / "test_config_role.py"),
                            "--repo", str(repo), "--profile", str(QUICK), "--accuracy-reference", str(onnx), "-v", *candidates)
    text = result.stdout.str()
    verdict = lambda test: next((line.split()[1] for line in result.outlines if f"::{test} " in line), None)  # noqa: E731
    for check in ("test_boxes", "test_map", "test_end_to_end_matches_local_run"):
        assert verdict(f"{check}[served:yolo_affine]") == "PASSED", text[-4000:]
        assert verdict(f"{check}[served:yolo_affine_swapped]") == "FAILED", text[-4000:]
        assert verdict(f"{check}[served:yolo_affine_undeclared]") == "SKIPPED", text[-4000:]
    assert verdict("test_batched_answers_are_each_requests_own[served:yolo_affine]") == "PASSED", text[-4000:]
    assert verdict("test_returned_box_maps_back_to_the_drawn_object[yolo_affine]") == "PASSED", text[-4000:]
    assert verdict("test_returned_box_maps_back_to_the_drawn_object[yolo_affine_swapped]") == "FAILED", text[-4000:]
    assert ('yolo_affine_swapped: every request carried inputs filled as ' in text and
            '([inputs.yolo_affine_swapped] affine = "letterbox_inverse"): if the model is right, the declaration is not'
            in text), text[-4000:]
    assert ("not tested, because yolo_affine_undeclared is not an end-to-end model: input 'image' BYTES [1] takes images, "
            "but the model also needs [\"'affine' FP32 [2, 3]\"]") in text, text[-4000:]
    assert '[inputs.yolo_affine_undeclared]; affine = "letterbox_affine|letterbox_inverse"' in text, text[-4000:]
    assert verdict("test_role[yolo_affine]") == "PASSED", text[-4000:]
    assert ("which the suites cannot infer unless yts.toml says what they carry ([inputs.NAME]); declare them: "
            "[inputs.yolo_affine_undeclared]; affine = ") in text, text[-4000:]  # the config suite's role check
    protocol = [line for line in result.outlines if "suites/protocol/" in line and " FAILED" in line]
    assert not protocol, "\n".join(protocol)
    result.stdout.fnmatch_lines(["*bad-input catalogue: * judged on this repository, * conform, 0 do not*"])
