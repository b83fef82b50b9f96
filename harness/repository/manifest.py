"""What a repository's owner declares about it, for what the suites cannot read from the configs: a
small TOML file (`--manifest PATH`, else `yts.toml` at the repository root) and `--model NAME=ROLE`,
`--imgsz`, `--nc` on the command line, which win over the file.

    # yts.toml
    imgsz = 640            # the input size the models were exported at
    nc = 80                # classes: raw outputs are [N, 4 + nc, anchors]
    [models]
    detector = "raw"       # [N, 3, H, W] FP32 letterboxed images -> [N, 4 + nc, anchors]
    pipeline = "e2e"       # encoded images (TYPE_STRING) -> detections [max_det, 6], num_detections
    tokenizer = "skip"     # not a detector: reported as not tested, never as passed
    [precision]
    detector = "fp16"      # what the served engine computes in: the accuracy gates follow it
    [layout.vendor_nms]    # what its config cannot say (harness.repository.layouts): any subset of
    input = "base64"       #   tensor | encoded | base64 | pixels
    boxes = "det_boxes"    #   outputs by name: rows = "..." | boxes/scores/classes (+ count) | json = "..." | raw
    scores = "det_scores"
    classes = "det_classes"
    count = "num_dets"
    box_format = "xywh"    #   xyxy (default) | xywh (top-left x, y, w, h) | cxcywh
    box_units = "pixels"   #   pixels (default) | normalized (fractions of the image the model saw)
    [inputs.vendor_pipeline]   # inputs beside the image no config can say how to fill
    affine = "letterbox_affine"     #   per image: [2, 3] source pixels -> model input (harness.repository.extra_inputs)
    inverse = "letterbox_inverse"   #   per image: [2, 3] model input -> source pixels
    orig_size = "image_hw"          #   per image: [2] (h, w) of the source image (image_wh: (w, h))
    threshold = 0.25                #   a constant: number, list or text; data type and shape from the config

A model neither declared nor recognisable is reported "not tested, because its layout is unknown", with
the [layout.NAME] lines that would place it; one whose image input is found but which needs other inputs,
with the [inputs.NAME] lines that would fill them. An [inputs.NAME] entry is checked against the model's
config as Triton completes it: an input the model lacks, or one whose data type or dims cannot hold the
value, is a ManifestError naming the entry, what the config has and what was declared. A model's precision, when not declared here or with `--precision NAME=fp16`, is read from its config's
`precision` parameter, else from its ONNX file (FP16/INT8 weights), else FP32."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.repository.extra_inputs import ExtraInput, check, parse_inputs
from harness.repository.layouts import LayoutDeclaration, parse_declaration, ports

MANIFEST_NAME = "yts.toml"
ROLES = ("raw", "e2e", "skip")
PRECISIONS = ("fp32", "fp16", "int8")
KEYS = ("imgsz", "nc", "models", "precision", "layout", "inputs")


class ManifestError(ValueError):
    """The manifest or a command-line declaration is wrong; the message says which entry and why."""


@dataclass(frozen=True)
class Manifest:
    models: dict[str, str] = field(default_factory=dict)
    imgsz: int | None = None
    nc: int | None = None
    source: str = "none"
    precisions: dict[str, str] = field(default_factory=dict)
    layouts: dict[str, LayoutDeclaration] = field(default_factory=dict)
    inputs: dict[str, tuple[ExtraInput, ...]] = field(default_factory=dict)

    def role(self, name: str) -> str | None:
        return self.models.get(name)

    def precision(self, name: str) -> str | None:
        return self.precisions.get(name)

    def layout(self, name: str) -> LayoutDeclaration | None:
        """The owner's [layout.NAME] declaration (harness.repository.layouts) with its [inputs.NAME] entries
        (harness.repository.extra_inputs), or None when neither is declared."""
        declared, extra = self.layouts.get(name), self.inputs.get(name, ())
        if not extra:
            return declared
        return replace(declared or LayoutDeclaration(source=self.source), inputs=extra)

    def skipped(self, name: str) -> bool:
        return self.models.get(name) == "skip"


def _positive(key: str, value, origin: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ManifestError(f"{origin}: {key} = {value!r} must be a positive integer")
    return value


def _role(name: str, role, origin: str) -> str:
    if role not in ROLES:
        raise ManifestError(f"{origin}: model {name!r} = {role!r}: the role must be one of {list(ROLES)}")
    return role


def _precision(name: str, precision, origin: str) -> str:
    if precision not in PRECISIONS:
        raise ManifestError(f"{origin}: precision of {name!r} = {precision!r}: one of {list(PRECISIONS)}")
    return precision


def _option(text: str, option: str, what: str, allowed: tuple[str, ...], check) -> tuple[str, str]:
    """`--OPTION NAME=VALUE` -> (NAME, VALUE), VALUE checked by `check(name, value, origin)`."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ManifestError(f"{option} {text!r}: expected NAME={what} with {what} one of {list(allowed)}")
    return name.strip(), check(name.strip(), value.strip(), option)


def parse_model_option(text: str) -> tuple[str, str]:
    """`--model NAME=ROLE` -> (NAME, ROLE)."""
    return _option(text, "--model", "ROLE", ROLES, _role)


def parse_precision_option(text: str) -> tuple[str, str]:
    """`--precision NAME=fp16` -> (NAME, fp16)."""
    return _option(text, "--precision", "PRECISION", PRECISIONS, _precision)


def _check_inputs(repository: Path, extra: dict[str, tuple[ExtraInput, ...]], origin: str) -> None:
    """Each [inputs.NAME] entry against NAME's config as Triton completes it (harness.checks.model)."""
    from harness.checks.model import completed_config

    for name, entries in extra.items():
        try:
            config = completed_config(repository / name)
        except Exception as error:  # an unreadable config: the config suite reports it; nothing to check against
            raise ManifestError(f"{origin}: [inputs.{name}]: {name}'s config cannot be read to check it: {error}") from None
        try:
            check(name, entries, ports(config.input), origin)
        except ValueError as error:
            raise ManifestError(str(error)) from None


def load_manifest(repository: Path, path: Path | None = None, models: list[str] = (), imgsz: int | None = None,
                  nc: int | None = None, precisions: list[str] = ()) -> Manifest:
    repository = Path(repository)
    path = Path(path) if path is not None else (repository / MANIFEST_NAME if (repository / MANIFEST_NAME).is_file() else None)
    data: dict = {}
    if path is not None:
        if not path.is_file():
            raise ManifestError(f"--manifest {path}: no such file")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ManifestError(f"{path}: not valid TOML: {error}") from None
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ManifestError(f"{path}: unknown keys {unknown} (a manifest has {list(KEYS)})")
        for table, what in (("models", "ROLE"), ("precision", "PRECISION"), ("layout", "[layout.NAME] table"),
                            ("inputs", "[inputs.NAME] table")):
            if not isinstance(data.get(table, {}), dict):
                raise ManifestError(f"{path}: [{table}] must be a table of NAME = {what}")
    origin = str(path) if path else "command line"
    declared = {name: _role(name, role, origin) for name, role in data.get("models", {}).items()}
    declared.update(parse_model_option(text) for text in models)
    precision = {name: _precision(name, value, origin) for name, value in data.get("precision", {}).items()}
    precision.update(parse_precision_option(text) for text in precisions)
    try:
        layouts = {name: parse_declaration(name, table, origin) for name, table in data.get("layout", {}).items()}
        extra = {name: parse_inputs(name, table, origin) for name, table in data.get("inputs", {}).items()}
    except ValueError as error:
        raise ManifestError(str(error)) from None
    present = sorted(p.name for p in repository.iterdir() if p.is_dir()) if repository.is_dir() else []
    missing = sorted((set(declared) | set(precision) | set(layouts) | set(extra)) - set(present))
    if missing:
        raise ManifestError(f"{origin}: declares {missing}, which the repository {repository} does not have (it has {present})")
    _check_inputs(repository, extra, origin)
    return Manifest(models=declared, precisions=precision, layouts=layouts, inputs=extra, imgsz=_positive("imgsz", imgsz if imgsz is not None else data.get("imgsz"), origin),
                    nc=_positive("nc", nc if nc is not None else data.get("nc"), origin),
                    source=", ".join(s for s in (str(path) if path else "", "command line" if (models or imgsz or nc or precisions) else "")
                                    if s) or "none")
