"""One accuracy session: turns candidate specifications into candidates, runs each over the evaluation
set once, and keeps the runs (the reference's, each candidate's, and the local twin of every served or
end-to-end candidate) for the tests that judge them. Unavailable candidates become skips with a reason."""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from pathlib import Path

import pytest

from harness import paths
from harness.accuracy import runner
from harness.accuracy.candidates import EndToEndCandidate, PreprocessConfig, RawCandidate, pipeline_candidate
from harness.accuracy.specs import CandidateSpec
from harness.checks.findings import NotTestedWarning
from harness.repository.layouts import RAW as RAW_OUTPUT


class AccuracySession:
    def __init__(self, profile, eval_set, artifact_cache, request: pytest.FixtureRequest):
        self.profile, self.eval_set, self.cache, self.request = profile, eval_set, artifact_cache, request
        self.imgsz = profile.eval["imgsz"]
        self._runs: dict[str, tuple] = {}
        self._by_content: dict[tuple, runner.Run] = {}
        self._built: dict[str, object] = {}
        self._reference_path: Path | None = None

    # -- settings -------------------------------------------------------------------------------
    def _run(self, candidate, lossless: bool = False) -> runner.Run:
        key = self._local_file_key(candidate, lossless)
        if key in self._by_content:  # the same file already ran here under another name (a served model's version
            return dataclasses.replace(self._by_content[key], name=candidate.name, precision=candidate.precision)
        e = self.profile.eval
        run = runner.run(candidate, self.eval_set, imgsz=self.imgsz, conf=e["map_conf"], iou=e["iou"],
                         max_det=e["max_det"], tensor_images=e["tensor_images"], lossless=lossless)
        if key is not None:
            self._by_content[key] = run
        return run

    @staticmethod
    def _local_file_key(candidate, lossless: bool) -> tuple | None:
        """A raw ONNX file run locally through ONNX Runtime gives the same detections whatever names it: the
        reference's INT8 variant and the served yolo_onnx version built from it are one run, keyed by the
        file's bytes (None for anything served or not a local ONNX Runtime run)."""
        from harness.engines.ort import OrtEngine

        if candidate.kind != "raw" or candidate.origin != "local" or not isinstance(candidate.engine, OrtEngine) \
                or candidate.artifact is None:
            return None
        digest = hashlib.sha256(Path(candidate.artifact).read_bytes()).hexdigest()
        return digest, lossless, repr(candidate.output)

    @staticmethod
    def judged_on_reference_pixels(candidate) -> bool:
        """A served end-to-end model decodes the images itself: its gates are run on PNGs of the pixels the
        reference decoded, so they judge its precision and processing, not its JPEG decoder (which
        test_jpeg_decoding judges on its own)."""
        return candidate.kind == "e2e" and candidate.origin == "served"

    def reference_path(self) -> Path:
        if self._reference_path is None:
            self._reference_path = self.cache.build(f"fp32-dyn-{self.imgsz}").path
        return self._reference_path

    def reference(self) -> runner.Run:
        if "reference" not in self._runs:
            from harness.engines.ort import OrtEngine

            candidate = RawCandidate("fp32 reference", "fp32", OrtEngine(self.reference_path()), artifact=self.reference_path())
            self._runs["reference"] = (candidate, self._run(candidate))
        return self._runs["reference"][1]

    # -- candidates -----------------------------------------------------------------------------
    def build(self, spec: CandidateSpec):
        """The candidate, built (artifacts, servers) but not yet run."""
        if spec.name not in self._built:
            self._built[spec.name] = self._build(spec)
        return self._built[spec.name]

    def candidate(self, spec: CandidateSpec):
        if spec.name not in self._runs:
            candidate = self.build(spec)
            self._runs[spec.name] = (candidate, self._run(candidate, lossless=self.judged_on_reference_pixels(candidate)))
        candidate, run = self._runs[spec.name]
        return spec, candidate, run

    def as_encoded(self, spec: CandidateSpec) -> runner.Run:
        """The candidate's run on the evaluation set's own encoded files (JPEG), as clients send them."""
        key = f"encoded:{spec.name}"
        if key not in self._runs:
            candidate = self.build(spec)
            self._runs[key] = (candidate, self._run(candidate))
        return self._runs[key][1]

    def judge_as(self, spec: CandidateSpec, candidate) -> str:
        return spec.judge_as or candidate.precision

    @staticmethod
    def twin_tolerance(candidate) -> str:
        """The local twin runs the candidate's ONNX file through ONNX Runtime in FP32: the same engine,
        judged exactly, when the candidate computes in FP32; for an FP16/INT8 engine serving that file
        (the GPU build's PyTorch FP16) it is not the same engine, and the candidate's precision judges."""
        return candidate.precision if candidate.precision in ("fp16", "int8") else "fp32"

    def _build(self, spec: CandidateSpec):
        from harness.engines.ort import OrtEngine

        e = self.profile.eval
        if spec.kind == "variant":
            from harness.engines.artifacts import VariantSpec
            from harness.engines.base import EngineUnavailable

            variant = VariantSpec.parse(spec.target)
            try:
                artifact = self.cache.build(variant)
                if variant.tensorrt:
                    from harness.engines.tensorrt_runtime import TensorRTEngine

                    engine = TensorRTEngine(artifact.path)
                else:
                    engine = OrtEngine(artifact.path)
            except (EngineUnavailable, ImportError) as error:
                pytest.skip(f"{spec.name}: {error}")
            return RawCandidate(spec.name, variant.precision, engine, artifact=artifact.path)
        if spec.kind == "pipeline":
            return pipeline_candidate(spec.name, self.reference_path(), spec.preprocess, imgsz=self.imgsz,
                                      conf=e["conf"], iou=e["iou"], max_det=e["max_det"])
        if spec.kind == "corrupted-weights":
            from harness.accuracy.corrupt import corrupt_largest_conv_weight

            out = paths.cache_dir("accuracy") / f"corrupted-{self.reference_path().parent.name}.onnx"
            corrupt_largest_conv_weight(self.reference_path(), out)
            return RawCandidate(spec.name, "fp32", OrtEngine(out), artifact=out)
        if spec.kind == "served":
            return self._served(spec)
        raise ValueError(f"candidate kind {spec.kind!r}")

    def _served(self, spec: CandidateSpec):
        from harness.accuracy import served

        repository = self.request.getfixturevalue("repository")
        client = self.request.getfixturevalue("http_client")
        if not client.is_model_ready(spec.target):
            from harness.availability import skip_if_unavailable

            skip_if_unavailable(self.request.config, spec.target)
            index = {e.get("name"): e for e in client.get_model_repository_index()}
            pytest.fail(f"{spec.name}: not loaded by this server: {index.get(spec.target, {}).get('reason') or 'not ready'}")
        manifest = self.request.getfixturevalue("manifest")
        settings = served.served_settings(repository, spec.target, manifest, self.profile.eval)
        config, layout, artifact, precision = settings.config, settings.layout, settings.artifact, settings.precision
        role = manifest.role(spec.target) or layout.role
        if layout.output is not None and layout.output.untested:
            warnings.warn(NotTestedWarning(f"{spec.target}: {layout.output.untested}"), stacklevel=2)
        if role == served.RAW:
            model = served.ServedRawModel(client, config)
            if layout.input is not None:
                model.input_name = layout.input.name
            return RawCandidate(spec.name, precision, model, input_name=model.input_name, origin="served", artifact=artifact,
                                output=layout.output if layout.output is not None and layout.output.kind == RAW_OUTPUT else None)
        thresholds = settings.thresholds
        try:
            detector = served.ServedEndToEndModel(client, config, manifest)
        except ValueError as error:
            pytest.skip(f"not tested, because {error}; declare it: {layout.what_to_declare()}")
        candidate = EndToEndCandidate(spec.name, precision, detector, thresholds["conf"], origin="served", artifact=artifact)
        candidate.thresholds = thresholds
        return candidate

    # -- the local twin ---------------------------------------------------------------------------
    def local_twin(self, candidate, artifact: Path | None = None) -> runner.Run:
        """The same artifact (or `artifact`: another version's file) run locally by the reference pipeline: for
        a served raw model its ONNX through ONNX Runtime, for an end-to-end candidate LocalPipeline with the
        reference preprocessing."""
        from harness.engines.ort import OrtEngine

        artifact = artifact or candidate.artifact
        if artifact is None:
            pytest.skip(f"{candidate.name}: no ONNX artifact found to run locally")
        key = f"local:{artifact}:{candidate.kind}:{getattr(candidate, 'conf', None)}"
        if key not in self._runs:
            if candidate.kind == "raw":
                twin = RawCandidate(f"local {Path(artifact).name}", candidate.precision, OrtEngine(artifact), artifact=artifact,
                                    output=candidate.output)
            else:
                t = getattr(candidate, "thresholds", {k: self.profile.eval[k] for k in ("conf", "iou", "max_det")})
                twin = pipeline_candidate(f"local {Path(artifact).name}", artifact, PreprocessConfig(),
                                          imgsz=self.imgsz, conf=t["conf"], iou=t["iou"], max_det=t["max_det"],
                                          precision=candidate.precision)
            self._runs[key] = (twin, self._run(twin))
        return self._runs[key][1]

    def version_match(self, spec: CandidateSpec, candidate, failures_against) -> list[str]:
        """For a served model whose folder holds several versions with different files: which version's file
        its answers match (harness.accuracy.versions), judged by `failures_against(local run)`."""
        from harness.accuracy import served
        from harness.accuracy.versions import version_match

        if spec.kind != "served" or candidate.artifact is None:
            return []
        artifacts = served.version_artifacts(Path(self.request.getfixturevalue("repository")), spec.target)
        return version_match(artifacts, candidate.artifact,
                             lambda path: self.local_twin(candidate, path), failures_against)
