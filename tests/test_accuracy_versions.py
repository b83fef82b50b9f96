"""Issue 34 item 4: the served-vs-local checks say which version's files a served model's answers match when
its folder holds several (fixtures/accuracy/versions/): version 2 of yolo_raw_stale (raw) and of
yolo_pixels_stale (end-to-end) open version 1's weights and fail test_served_tensors_match_local_run /
test_end_to_end_matches_local_run with "the answers match the model file of version 1 …"; yolo_raw and
yolo_pixels, each version on its own file, pass the same checks.

Speed: one pytester run, one process server, 8 images at 320 (fixtures/accuracy/profiles/quick.toml)."""

from __future__ import annotations

import re

import pytest

from harness import paths

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: F401
import harness.vision.letterbox  # noqa: F401
from tests.conftest import load_module, run_suite_file

pytestmark = pytest.mark.server
PROFILE = paths.FIXTURES / "accuracy" / "profiles" / "quick.toml"
IMGSZ = 320
CHECKS = {"yolo_raw": "test_served_tensors_match_local_run", "yolo_raw_stale": "test_served_tensors_match_local_run",
          "yolo_pixels": "test_end_to_end_matches_local_run", "yolo_pixels_stale": "test_end_to_end_matches_local_run"}
MODELS = tuple(CHECKS)


def test_the_version_whose_files_answer_is_named_and_own_files_pass(pytester, tmp_path):
    try:
        onnx = load_module(paths.FIXTURES / "layouts" / "build.py").reference_onnx(IMGSZ)
    except FileNotFoundError as error:
        pytest.skip(f"needs the reference model: {error}")
    repo = load_module(paths.FIXTURES / "accuracy" / "versions" / "build.py").build(tmp_path / "models", onnx, IMGSZ)
    pytester.chdir()
    candidates = [a for name in MODELS for a in ("--accuracy-candidate", f"served:{name}")]
    result = run_suite_file(pytester, paths.PROJECT_ROOT / "suites" / "accuracy", "--repo", str(repo), "--profile",
                            str(PROFILE), "--accuracy-reference", str(onnx), "-v", *candidates, "-k",
                            "test_served_tensors_match_local_run or test_end_to_end_matches_local_run")
    text = result.stdout.str()
    verdicts = {k: v for k, v in re.findall(r"::(\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", text) if v != "SKIPPED"}
    assert verdicts == {f"{CHECKS[name]}[served:{name}]": "FAILED" if name.endswith("_stale") else "PASSED"
                        for name in MODELS}, text[-4000:]
    for name in ("yolo_raw_stale", "yolo_pixels_stale"):
        assert (f"the answers match the model file of version 1 ({name}/1/model.onnx), not version 2's "
                f"({name}/2/model.onnx), which unversioned requests reach: version 2 serves another version's "
                "files") in text, text[-4000:]


def test_versions_with_the_same_file_are_not_asked_and_no_match_is_said(tmp_path):
    """The judgement alone, on runs named by their file: a version holding the same bytes as the compared one
    tells nothing and is not run; when no other version's file matches either, the message says so."""
    from harness.accuracy.runner import Run
    from harness.accuracy.versions import version_match

    files = {}
    for version, content in ((1, b"first"), (2, b"second"), (3, b"second")):
        files[version] = tmp_path / "m" / str(version) / "model.onnx"
        files[version].parent.mkdir(parents=True)
        files[version].write_bytes(content)
    ran = []

    def run_twin(path):
        ran.append(path)
        return Run(str(path), "fp32", "raw", 0.0)

    assert version_match(files, files[3], run_twin, lambda run: ["differs"]) == [
        "the answers match no version's model file either (m/1/model.onnx, run locally, differs too)"]
    assert ran == [files[1]]
    assert version_match(files, files[3], run_twin, lambda run: [] if run.name == str(files[1]) else ["differs"]) == [
        "the answers match the model file of version 1 (m/1/model.onnx), not version 3's (m/3/model.onnx), which "
        "unversioned requests reach: version 3 serves another version's files"]
    assert version_match({1: files[1]}, files[1], run_twin, lambda run: []) == []  # one version: nothing to say
