"""Triton's own model-configuration QA corpus (qa/L0_model_config of triton-inference-server/server)
as the ground truth for the offline config checks: each case is laid out the way Triton's QA runner
(test.sh) lays it out, judged by the same checks the config suite runs, and compared with what Triton
does with it — refuses it with the text of its `expected*` files, or loads it.

The corpus is third-party data and is read where it lies (`../shared/triton-qa` beside the project, or
`--corpus`), never copied into the project. Cases that need files the QA runner copies from NVIDIA's
private data volume (TensorRT plans, libtorch models, the Python models' model.py) or that are about
something the config suite does not judge are out of scope, each with its reason (OUT_OF_SCOPE).

`yts triton-qa` prints the agreement table by group and by rule family."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.paths import PROJECT_ROOT

DEFAULT_CORPUS = PROJECT_ROOT.parent / "shared" / "triton-qa"
# The platforms test.sh writes into each noautofill_platform case (the README of the corpus).
TRIALS = ("tensorrt_plan", "onnxruntime_onnx", "pytorch_libtorch")
# The QA host: one GPU (CUDA_VISIBLE_DEVICES=0).
QA_GPUS = frozenset({0})
# (path prefix inside L0_model_config, reason): cases the offline checks cannot or do not judge.
OUT_OF_SCOPE = (
    ("noautofill_platform/control_", "sequence batching control inputs (not judged by the config suite)"),
    ("model_metrics/", "model_metrics (custom metric histograms: not judged by the config suite)"),
    ("autofill_noplatform/openvino/", "OpenVINO models (not judged by the config suite)"),
    ("autofill_noplatform_success/openvino/", "OpenVINO models (not judged by the config suite)"),
    ("cli_messages/", "server command-line messages, not configs"),
    ("custom_parameters/", "TensorRT backend parameters, read when a plan loads (needs a plan)"),
    ("autofill_noplatform/tensorrt/", "needs the TensorRT plan test.sh copies from NVIDIA's data volume (not public)"),
    ("autofill_noplatform_success/tensorrt/", "needs the TensorRT plan test.sh copies from NVIDIA's data volume "
                                              "(not public)"),
    ("autofill_noplatform/pytorch/", "needs the libtorch model.pt test.sh copies from NVIDIA's data volume"),
    ("autofill_noplatform_success/pytorch/", "needs the libtorch model.pt test.sh copies from NVIDIA's data volume"),
    ("autofill_noplatform/python/", "needs the model.py (auto_complete_config) the corpus does not ship"),
    ("autofill_noplatform_success/python/", "needs the model.py (auto_complete_config) the corpus does not ship"),
    ("autofill_noplatform_success/onnx/cpu_instance", "needs the ONNX model test.sh copies from NVIDIA's data volume"),
)
EXPECTED_CONFIG = re.compile(r"^expected(\.\d+)?$")


@dataclass
class Case:
    group: str  # e.g. noautofill_platform, autofill_noplatform/ensemble
    name: str
    source: Path
    trial: str | None = None  # the platform written into a noautofill_platform case
    accept: bool = False
    expected: list[str] = field(default_factory=list)  # Triton's refusal texts (grep patterns)
    out_of_scope: str | None = None

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}" + (f" [{self.trial}]" if self.trial else "")

    @property
    def family(self) -> str:
        """The rule family: the case name without its trailing number."""
        return re.sub(r"(_?\d+)$", "", self.name.split(".")[0])


@dataclass
class Verdict:
    case: Case
    outcome: str  # caught | other cause | missed | clean | false finding | out of scope
    findings: list[str] = field(default_factory=list)


def cases(corpus: Path = DEFAULT_CORPUS) -> list[Case]:
    root = Path(corpus) / "qa" / "L0_model_config"
    if not root.is_dir():
        raise FileNotFoundError(f"no Triton QA corpus at {corpus} (expected qa/L0_model_config in it)")
    found: list[Case] = []
    for case_dir in sorted((root / "special_cases").iterdir()):
        found.append(_case("special_cases", case_dir))
    for case_dir in sorted((root / "noautofill_platform").iterdir()):
        found += [_case("noautofill_platform", case_dir, trial=trial) for trial in TRIALS]
    for kind in ("autofill_noplatform", "autofill_noplatform_success"):
        for backend_dir in sorted((root / kind).iterdir()):
            for case_dir in sorted(backend_dir.iterdir()):
                found.append(_case(f"{kind}/{backend_dir.name}", case_dir, accept=kind.endswith("success")))
    for sub in ("model_metrics", "custom_parameters", "cli_messages"):
        for path in sorted((root / sub).rglob("expected")):
            found.append(_case(sub, path.parent))
    for case in found:
        relative = f"{case.group}/{case.name}"
        case.out_of_scope = next((why for prefix, why in OUT_OF_SCOPE if relative.startswith(prefix)), None)
    return found


def _case(group: str, case_dir: Path, *, trial: str | None = None, accept: bool = False) -> Case:
    name = case_dir.name if group not in ("model_metrics", "custom_parameters", "cli_messages") else \
        str(case_dir.relative_to(case_dir.parents[1]))
    texts = [] if accept else [p.read_text().strip() for p in sorted(case_dir.glob("expected*")) if p.is_file()]
    return Case(group, name, case_dir, trial, accept, texts)


def grep_pattern(text: str) -> re.Pattern:
    """A `grep` basic regular expression (what test.sh matches with) as a Python pattern: `\\x` is
    the literal x, `.` any character, `*` repetition; everything else is literal."""
    parts, index = [], 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            parts.append(re.escape(text[index + 1]))
            index += 2
            continue
        parts.append(char if char in ".*" else re.escape(char))
        index += 1
    return re.compile("".join(parts))


def lay_out(case: Case, models: Path) -> None:
    """The repository test.sh serves for the case: the case folder as one model (or, without a
    config.pbtxt at its top, as a whole repository), the platform rewritten for a noautofill trial,
    and a version folder `1/` where test.sh makes one (every model of an autofill case, the special
    cases, the three instance-group cases; runtime_escape's dummy runtime library)."""
    from harness.repository.config import read_config, write_config

    ignore = shutil.ignore_patterns("expected*")
    if (case.source / "config.pbtxt").is_file() or case.group.startswith(("noautofill", "special")) \
            or any(case.source.glob("1")):
        shutil.copytree(case.source, models / case.source.name, ignore=ignore)
    else:
        shutil.copytree(case.source, models, ignore=ignore, dirs_exist_ok=True)
    model_dirs = [p for p in models.iterdir() if p.is_dir()]
    if case.trial:
        config = read_config(model_dirs[0])
        config.platform = case.trial
        write_config(model_dirs[0], config)
    if case.group.startswith(("autofill", "special")) or case.name in ("invalid_cpu", "invalid_gpu", "negative_gpu"):
        for model_dir in model_dirs:
            if not any(p.is_dir() and p.name.isdigit() for p in model_dir.iterdir()):
                (model_dir / "1").mkdir()
    if case.name == "runtime_escape":  # the library its runtime points at, outside the backend folder
        library = models / case.name / "dummy_runtime" / "libtriton_identity.so"
        library.parent.mkdir(parents=True)
        library.write_bytes(b"")


def judge(case: Case, scratch: Path) -> Verdict:
    if case.out_of_scope:
        return Verdict(case, "out of scope")
    from harness.checks.bindings import check_bindings
    from harness.checks.findings import NotApplicable
    from harness.checks.layout import check_layout
    from harness.checks.model import list_models, load_entry
    from harness.checks.schema import check_schema

    models = scratch / "models"
    shutil.rmtree(models, ignore_errors=True)
    models.mkdir(parents=True)
    lay_out(case, models)
    autocomplete = not case.group.startswith(("noautofill", "special"))
    messages: list[str] = []
    for name in list_models(models):
        entry = load_entry(models, name, autocomplete=autocomplete)
        for check in (check_layout, lambda e: check_schema(e, gpus=QA_GPUS), check_bindings):
            try:
                messages += [str(f) for f in check(entry)]
            except NotApplicable:
                pass
    if case.accept:
        return Verdict(case, "false finding" if messages else "clean", messages)
    if not messages:
        return Verdict(case, "missed")
    patterns = [grep_pattern(text) for text in case.expected]
    caught = any(p.search(m) for p in patterns for m in messages)
    return Verdict(case, "caught" if caught else "other cause", messages)


def run(corpus: Path = DEFAULT_CORPUS) -> tuple[list[Verdict], float]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="yts-triton-qa-") as scratch:
        verdicts = [judge(case, Path(scratch)) for case in cases(corpus)]
    return verdicts, time.perf_counter() - started


OUTCOMES = ("caught", "other cause", "missed", "clean", "false finding", "out of scope")


def table(verdicts: list[Verdict], by: str = "group") -> list[tuple[str, Counter]]:
    rows: dict[str, Counter] = defaultdict(Counter)
    for verdict in verdicts:
        key = verdict.case.group if by == "group" else f"{verdict.case.group.split('/')[0]}: {verdict.case.family}"
        rows[key][verdict.outcome] += 1
    return sorted(rows.items())


def render(verdicts: list[Verdict], seconds: float, *, details: bool = False) -> str:
    lines = []
    for by in ("group", "family"):
        lines.append(f"{'by ' + by:<58} " + " ".join(f"{o:>13}" for o in OUTCOMES))
        for key, counts in table(verdicts, by):
            lines.append(f"{key:<58} " + " ".join(f"{counts.get(o, 0):>13}" for o in OUTCOMES))
        lines.append("")
    total = Counter(v.outcome for v in verdicts)
    rejects = total["caught"] + total["other cause"] + total["missed"]
    accepts = total["clean"] + total["false finding"]
    lines.append(f"{len(verdicts)} server runs in {seconds:.2f} s: in-scope refusals {rejects}, caught with Triton's "
                 f"cause {total['caught']} ({100 * total['caught'] / max(rejects, 1):.1f} %), other cause "
                 f"{total['other cause']}, missed {total['missed']}; in-scope loads {accepts}, clean {total['clean']}, "
                 f"false findings {total['false finding']}; out of scope {total['out of scope']}")
    out = Counter(v.case.out_of_scope for v in verdicts if v.case.out_of_scope)
    lines += [f"  out of scope: {count:>3}  {why}" for why, count in sorted(out.items())]
    if details:
        for verdict in verdicts:
            if verdict.outcome in ("other cause", "missed", "false finding"):
                lines.append(f"\n{verdict.outcome}: {verdict.case.key}")
                lines += [f"  expected: {text}" for text in verdict.case.expected]
                lines += [f"  found:    {message}" for message in verdict.findings]
    return "\n".join(lines)


def main(args) -> int:
    import sys

    try:
        verdicts, seconds = run(Path(args.corpus))
    except FileNotFoundError as error:
        print(f"yts triton-qa: {error}", file=sys.stderr)
        return 2
    print(render(verdicts, seconds, details=args.details))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("triton-qa", help="run the offline config checks over Triton's own QA corpus "
                                                     "and print where they agree with Triton")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS),
                        help=f"the corpus folder (holding qa/L0_model_config; default {DEFAULT_CORPUS})")
    parser.add_argument("--details", action="store_true", help="list every disagreement with the findings")
    parser.set_defaults(func=main)
