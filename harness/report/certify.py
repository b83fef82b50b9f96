"""`yts certify`: any repository in, a report directory out (report.json, report.html, junit.xml) and
an exit code from the certification gate. It is exactly `pytest suites --repo PATH --report-dir DIR
--certify-profile NAME --junitxml DIR/junit.xml`, run in a subprocess so the harness's own process
never holds a server.

Interrupted (Ctrl-C, SIGTERM, SIGHUP, `timeout`), it passes the signal on to pytest, which runs in a
session of its own so that it gets exactly one: pytest finishes the interrupted session, writing a partial
report marked incomplete, and stops its servers, within cleanup.DEADLINE_S; the CLI kills it at
HARD_STOP_S if not. Its exit code is then 128 + the signal. It names only report files that exist, and
renders report.html itself from the last report.json a run that died left behind.

With --diagnose, a finished run whose accuracy suite has a failing check (the repository's, not a harness
self-check) is followed by the ablation ladder (`yts diagnose`) on the same --repo before report.html is
rendered: report.json gets "diagnose", report.html its "Ablation ladder" section. It informs; the verdict and
the exit code stay the gate's."""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.paths import PROJECT_ROOT

REPORT_FILES = ("report.json", "report.html", "junit.xml")
DIAGNOSE_FILES = ("diagnose.json", "diagnose.html")  # --diagnose
HARD_STOP_S = 9.5  # after the first signal, the CLI kills a pytest that has not finished by then
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

SUITES = ("config", "protocol", "letterbox", "accuracy", "lifecycle", "batching")
# certify's own options that go to pytest as they are (paths made absolute: pytest runs from the project)
PASSED_ON = (("eval_set", "--eval-set"), ("reference", "--accuracy-reference"), ("manifest", "--manifest"),
             ("imgsz", "--imgsz"), ("nc", "--nc"), ("triton_image", "--triton-image"), ("triton_url", "--triton-url"))
PATHS = ("eval_set", "reference", "manifest")


def pytest_command(args) -> list[str]:
    report_dir = Path(args.report_dir).resolve()
    suites = [str(PROJECT_ROOT / "suites" / s) for s in (args.suites or SUITES)]
    command = [sys.executable, "-m", "pytest", *suites, "-c", str(PROJECT_ROOT / "pytest.ini"),
               "--rootdir", str(PROJECT_ROOT),
               f"--repo={Path(args.repo).resolve()}" if args.repo else f"--device={args.device}",
               f"--report-dir={report_dir}", f"--certify-profile={args.profile}",
               f"--junitxml={report_dir / 'junit.xml'}", f"--triton={args.triton}", "-q"]
    if args.strict:
        command.append("--certify-strict")
    if args.no_adapter:
        command.append("--no-adapter")
    for attr, option in PASSED_ON:
        value = getattr(args, attr)
        if value:
            command.append(f"{option}={Path(value).resolve() if attr in PATHS else value}")
    command += [f"--model={declaration}" for declaration in args.model or ()]
    command += [f"--precision={declaration}" for declaration in args.precision or ()]
    command += [f"--onnx-for={declaration}" for declaration in args.onnx_for or ()]
    return command + list(args.pytest_args)


def certify(args) -> int:
    if args.repo and not Path(args.repo).is_dir():
        print(f"yts certify: --repo {args.repo} is not a directory", file=sys.stderr)
        return 2
    if args.diagnose and not args.repo:
        print("yts certify: --diagnose needs --repo (the ladder runs on the repository under test)", file=sys.stderr)
        return 2
    command = pytest_command(args)
    report_dir = Path(args.report_dir).resolve()
    for name in REPORT_FILES + DIAGNOSE_FILES:  # an earlier run's report is never presented as this one's
        (report_dir / name).unlink(missing_ok=True)
    print("[yts certify] " + " ".join(command), flush=True)
    status, signum = run_forwarding_signals(command)
    diagnosed = args.diagnose and signum is None and status >= 0 and diagnose_after(report_dir, Path(args.repo))
    return conclude(report_dir, args.profile, status, signum, args.strict, rerender=diagnosed)


def accuracy_failures(report: dict) -> list[str]:
    """The repository's failing accuracy checks (the harness's own variants are not the repository's)."""
    return [c["id"] for c in report.get("checks", []) if c.get("suite") == "accuracy"
            and c.get("verdict") in ("failed", "error") and not c.get("harness_self_check")]


def diagnose_after(report_dir: Path, repo: Path) -> bool:
    """--diagnose: the ladder on `repo` when the finished run's accuracy suite failed; True when it wrote one
    (diagnose.json, report.json's "diagnose"), so report.html is rendered again with its section."""
    from harness.diagnose.cli import write_report
    from harness.diagnose.ladder import run_ladder

    report = report_dir / "report.json"
    failing = accuracy_failures(json.loads(report.read_text())) if report.is_file() else []
    if not failing:
        print("[yts certify] --diagnose: no accuracy check failed, the ladder did not run", flush=True)
        return False
    print(f"[yts certify] --diagnose: {len(failing)} accuracy check(s) failed: the ablation ladder on {repo}", flush=True)
    try:
        ladder = run_ladder(repo, log=lambda line: print(f"[yts diagnose] {line}", flush=True)).as_dict()
    except Exception as error:  # the ladder informs; its own failure is reported, never the run's
        ladder = {"repository": str(repo), "error": f"{type(error).__name__}: {error}"}
    ladder["after"] = failing
    write_report(report_dir, ladder)
    print(f"[yts certify] diagnose: {ladder.get('verdict') or 'the ladder did not run: ' + ladder['error']}", flush=True)
    return True


def _interrupt_with_parent() -> None:
    """In pytest before exec: if the CLI dies (even by SIGKILL), pytest is interrupted (SIGTERM) and still
    writes its partial report and stops its servers."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def run_forwarding_signals(command: list[str]) -> tuple[int, int | None]:
    """(pytest's return code, the first signal the CLI received or None)."""
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, start_new_session=True, preexec_fn=_interrupt_with_parent)
    received: list[tuple[int, float]] = []

    def forward(signum, frame):
        if not received:
            print(f"\n[yts certify] {signal.Signals(signum).name}: stopping the run, writing a partial report "
                  f"(at most {HARD_STOP_S:.0f} s)", file=sys.stderr, flush=True)
        received.append((signum, time.monotonic()))
        try:
            process.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        while True:
            try:
                status = process.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                if received and time.monotonic() - received[0][1] > HARD_STOP_S:
                    process.kill()
                    status = process.wait()
                    break
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if status < 0:  # pytest died outright (killed, out of memory): its servers died with it, not its stubs
        from harness.servers import cleanup

        cleanup.sweep()
    return status, (received[0][0] if received else None)


def conclude(report_dir: Path, profile: str, status: int, signum: int | None, strict: bool = False,
             rerender: bool = False) -> int:
    """Say honestly what happened and what was written; the exit code. `rerender`: report.html is rendered
    again (the ladder was added after pytest rendered it)."""
    from harness.report import gate, html

    if signum is not None:
        print(f"[yts certify] interrupted by {signal.Signals(signum).name}: pytest exited with {status}")
    elif status < 0:
        print(f"[yts certify] pytest died of {signal.Signals(-status).name}")
    incomplete = False
    report = report_dir / "report.json"
    if report.is_file():
        data = json.loads(report.read_text())
        incomplete = data.get("complete") is False
        line = gate.judge(data, gate.load_profile(profile), strict=strict or None).line()
        if rerender or not (report_dir / "report.html").is_file():  # the run died before rendering: render what it left
            html.render(report_dir, line)
        if not 0 <= status < 128:  # pytest did not finish its session, so did not print the verdict
            print(line)
    written = [name for name in REPORT_FILES + DIAGNOSE_FILES if (report_dir / name).is_file()]
    missing = [name for name in REPORT_FILES if name not in written]
    if incomplete:
        print("[yts certify] the run did not finish: the report is partial (marked incomplete)")
    if "report.html" in written:
        print(f"[yts certify] report: {report_dir / 'report.html'}")
    print(f"[yts certify] written in {report_dir}: {', '.join(written) or 'nothing'}"
          + (f"; not written: {', '.join(missing)}" if missing else ""))
    if signum is not None:
        return 128 + signum
    if status < 0:
        return 128 - status
    return status or (1 if incomplete or "report.json" in missing else 0)


def register(subparsers) -> None:
    parser = subparsers.add_parser("certify", help="run every suite against a repository and write a report")
    parser.add_argument("--repo", help="model repository under test (read-only: a scratch copy is used); default: the "
                                       "reference repository built for this host (--device)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"),
                        help="without --repo: which reference build (auto: gpu where an NVIDIA GPU and a CUDA torch are)")
    parser.add_argument("--precision", action="append", metavar="NAME=PRECISION",
                        help="what a served model computes in (fp32, fp16, int8); the accuracy gates follow it")
    parser.add_argument("--report-dir", default="reports/latest", help="where report.json/html and junit.xml go")
    parser.add_argument("--profile", default="certified", help="certification profile: name in harness/report/profiles or a .toml path")
    parser.add_argument("--strict", action="store_true",
                        help="refuse partial coverage: a model this host cannot serve makes the run PARTIAL (exit 6) even "
                             "under a profile that accepts it (default profile: certified for what could be tested "
                             "here, listing each such model and the way out)")
    parser.add_argument("--no-adapter", action="store_true",
                        help="on the embedded server, do not serve onnxruntime_onnx models through the harness's ONNX "
                             "Runtime adapter: they are then not tested on this host")
    parser.add_argument("--onnx-for", action="append", metavar="MODEL=FILE",
                        help="a tensorrt_plan model this server cannot run, served through the ONNX Runtime adapter "
                             "from the ONNX it was built from, at that ONNX's precision (labelled so)")
    parser.add_argument("--diagnose", action="store_true",
                        help="when an accuracy check fails, run the ablation ladder (yts diagnose) on --repo after the "
                             "suites: report.json \"diagnose\", report.html's section; the verdict stays the gate's")
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
