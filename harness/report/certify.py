"""`yts certify`: any repository in, a report directory out (report.json, report.html, junit.xml) and
an exit code from the certification gate. It is exactly `pytest suites --repo PATH --report-dir DIR
--certify-profile NAME --junitxml DIR/junit.xml`, run in a subprocess so the harness's own process
never holds a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.paths import PROJECT_ROOT

SUITES = ("config", "protocol", "letterbox", "accuracy", "lifecycle", "batching")
# certify's own options that go to pytest as they are (paths made absolute: pytest runs from the project)
PASSED_ON = (("eval_set", "--eval-set"), ("reference", "--accuracy-reference"), ("manifest", "--manifest"),
             ("imgsz", "--imgsz"), ("nc", "--nc"), ("triton_image", "--triton-image"), ("triton_url", "--triton-url"))
PATHS = ("eval_set", "reference", "manifest")


def pytest_command(args) -> list[str]:
    report_dir = Path(args.report_dir).resolve()
    suites = [str(PROJECT_ROOT / "suites" / s) for s in (args.suites or SUITES)]
    command = [sys.executable, "-m", "pytest", *suites, "-c", str(PROJECT_ROOT / "pytest.ini"),
               "--rootdir", str(PROJECT_ROOT), f"--repo={Path(args.repo).resolve()}",
               f"--report-dir={report_dir}", f"--certify-profile={args.profile}",
               f"--junitxml={report_dir / 'junit.xml'}", f"--triton={args.triton}", "-q"]
    for attr, option in PASSED_ON:
        value = getattr(args, attr)
        if value:
            command.append(f"{option}={Path(value).resolve() if attr in PATHS else value}")
    command += [f"--model={declaration}" for declaration in args.model or ()]
    return command + list(args.pytest_args)


def certify(args) -> int:
    if not Path(args.repo).is_dir():
        print(f"yts certify: --repo {args.repo} is not a directory", file=sys.stderr)
        return 2
    command = pytest_command(args)
    print("[yts certify] " + " ".join(command), flush=True)
    status = subprocess.run(command, cwd=PROJECT_ROOT).returncode
    print(f"[yts certify] report: {Path(args.report_dir).resolve() / 'report.html'}")
    return status


def register(subparsers) -> None:
    parser = subparsers.add_parser("certify", help="run every suite against a repository and write a report")
    parser.add_argument("--repo", required=True, help="model repository under test (read-only: a scratch copy is used)")
    parser.add_argument("--report-dir", default="reports/latest", help="where report.json/html and junit.xml go")
    parser.add_argument("--profile", default="certified", help="certification profile: name in harness/report/profiles or a .toml path")
    parser.add_argument("--suites", nargs="*", choices=SUITES, help="a subset of the suites (default: all)")
    parser.add_argument("--eval-set", help="labelled evaluation set (COCO annotations.json or YOLO images/ + labels/)")
    parser.add_argument("--reference", help="the FP32 ONNX your deployment was built from (the accuracy suite's reference)")
    parser.add_argument("--manifest", help="TOML declaring model roles, imgsz and nc (default: yts.toml in the repository)")
    parser.add_argument("--model", action="append", metavar="NAME=ROLE",
                        help="declare a model's role: raw, e2e or skip (repeatable; wins over the manifest)")
    parser.add_argument("--imgsz", type=int, help="the models' input size")
    parser.add_argument("--nc", type=int, help="the models' class count")
    parser.add_argument("--triton", default="process", choices=("auto", "process", "container", "url"))
    parser.add_argument("--triton-image")
    parser.add_argument("--triton-url")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest as they are")
    parser.set_defaults(func=certify)
