"""`yts diagnose --repo R`: the ablation ladder (harness.diagnose.ladder) on a scratch copy of R.

With --report-dir D it writes D/diagnose.json (the ladder's as_dict) and D/diagnose.html; a report directory
that already holds a run (report.json) gets the ladder as report.json's "diagnose" and report.html's
"Ablation ladder" section, under the verdict that run was judged with (the ladder never changes it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def write_report(report_dir: Path, ladder: dict) -> list[Path]:
    """diagnose.json and diagnose.html in `report_dir`; report.json, if there, gets the ladder as "diagnose".
    report.html is left to the caller (it needs the run's verdict)."""
    from harness.report import html

    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    written = [report_dir / html.DIAGNOSE_NAME]
    written[0].write_text(json.dumps(ladder, indent=2, default=str))
    report = report_dir / "report.json"
    if report.is_file():
        data = json.loads(report.read_text())
        data["diagnose"] = ladder
        report.write_text(json.dumps(data, indent=2, default=str))
        written.append(report)
    written.append(html.render_diagnose(report_dir, ladder))
    return written


def diagnose(args) -> int:
    from harness.diagnose.ladder import run_ladder
    from harness.report import html

    try:
        ladder = run_ladder(Path(args.repo), args.images, log=lambda line: print(f"[yts diagnose] {line}", flush=True))
    except ValueError as error:  # no raw model, no FP32 version: the ladder has nowhere to start
        print(f"yts diagnose: {error}", file=sys.stderr)
        return 2
    print(f"[yts diagnose] {ladder.verdict()}")
    if args.json:
        Path(args.json).write_text(json.dumps(ladder.as_dict(), indent=2))
    if args.report_dir:
        report_dir = Path(args.report_dir)
        written = write_report(report_dir, ladder.as_dict())
        line = html.verdict_line_of(report_dir)
        if line is not None and (report_dir / "report.json").is_file():  # a run's report: its section, same verdict
            written.append(html.render(report_dir, line))
        print(f"[yts diagnose] written: {', '.join(str(p) for p in written)}")
    return 1 if ladder.first_divergent else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("diagnose", help="the ablation ladder: plain FP32 first, then each optimisation "
                                   "the repository uses, naming the first rung whose detections diverge")
    parser.add_argument("--repo", required=True, help="the model repository (read only: a scratch copy is edited)")
    parser.add_argument("--images", type=int, default=8, help="synthetic evaluation images per rung (default 8)")
    parser.add_argument("--json", help="write the ladder as JSON here")
    parser.add_argument("--report-dir", help="write diagnose.json and diagnose.html here; a `yts certify` report "
                        "directory also gets the ladder in report.json and report.html")
    parser.set_defaults(func=diagnose)
