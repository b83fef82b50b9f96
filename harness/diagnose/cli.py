"""`yts diagnose --repo R`: the ablation ladder (harness.diagnose.ladder) on a scratch copy of R."""

from __future__ import annotations

import json
from pathlib import Path


def diagnose(args) -> int:
    from harness.diagnose.ladder import run_ladder

    ladder = run_ladder(Path(args.repo), args.images, log=lambda line: print(f"[yts diagnose] {line}", flush=True))
    print(f"[yts diagnose] {ladder.verdict()}")
    if args.json:
        Path(args.json).write_text(json.dumps(ladder.as_dict(), indent=2))
    return 1 if ladder.first_divergent else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("diagnose", help="the ablation ladder: plain FP32 first, then each optimisation "
                                   "the repository uses, naming the first rung whose detections diverge")
    parser.add_argument("--repo", required=True, help="the model repository (read only: a scratch copy is edited)")
    parser.add_argument("--images", type=int, default=8, help="synthetic evaluation images per rung (default 8)")
    parser.add_argument("--json", help="write the ladder as JSON here (the report's section reads it)")
    parser.set_defaults(func=diagnose)
