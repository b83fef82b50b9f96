"""Candidate specifications, what `--accuracy-candidate` takes:

- `variant:NAME` a harness-built variant (harness.engines.artifacts), e.g. variant:fp16-dyn-640;
- `served:MODEL` a model of the repository under test (raw-tensor or end-to-end, from its config);
- `path/to/file.toml` a described candidate, as the broken ones in fixtures/accuracy/ are:

    kind = "pipeline"            # a local end-to-end deployment of the reference with [preprocess]
    kind = "corrupted-weights"   # the reference with its largest Conv weight shuffled
    kind = "variant"             # variant = "int8-day-minmax-quint8-dyn-640"
    judge_as = "fp32"            # which profile thresholds apply (default: the candidate's precision)
    expect_failure = "boxes"     # documentation: the check that must catch it (tests/ hold it to that)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.accuracy.candidates import PreprocessConfig


@dataclass(frozen=True)
class CandidateSpec:
    name: str
    kind: str  # variant | served | pipeline | corrupted-weights
    target: str = ""  # variant name or served model name
    judge_as: str | None = None
    preprocess: PreprocessConfig = field(default_factory=PreprocessConfig)
    description: str = ""
    expect_failure: str | None = None
    source: Path | None = None

    @property
    def id(self) -> str:
        return self.name


KINDS = ("variant", "served", "pipeline", "corrupted-weights")


def parse(text: str, imgsz: int | None = None) -> CandidateSpec:
    if text.endswith(".toml"):
        return _from_file(Path(text), imgsz)
    kind, _, target = text.partition(":")
    if kind not in ("variant", "served") or not target:
        raise ValueError(f"candidate {text!r}: expected variant:NAME, served:MODEL or a .toml file")
    return CandidateSpec(name=text, kind=kind, target=target)


def _from_file(path: Path, imgsz: int | None) -> CandidateSpec:
    if not path.is_file():
        raise FileNotFoundError(f"candidate file {path} not found")
    data = tomllib.loads(path.read_text())
    kind = data.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{path}: kind {kind!r}, expected one of {KINDS}")
    target = str(data.get("variant", data.get("model", "")))
    if imgsz is not None and kind == "variant":
        target = target.replace("-640", f"-{imgsz}") if target.endswith("-640") else target
    return CandidateSpec(
        name=data.get("name", path.stem), kind=kind, target=target, judge_as=data.get("judge_as"),
        preprocess=PreprocessConfig(**data.get("preprocess", {})), description=data.get("description", ""),
        expect_failure=data.get("expect_failure"), source=path,
    )
