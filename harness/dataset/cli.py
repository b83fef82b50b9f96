"""`yts dataset generate`: write a synthetic shapes split (deterministic in --seed)."""

from __future__ import annotations

import os

from harness.dataset.generate import SIZES, generate_split


def _generate(args) -> int:
    out = generate_split(args.out, seed=args.seed, n_day=args.day, n_night=args.night, sizes=args.sizes,
                         workers=args.workers)
    print(f"wrote {args.day} day + {args.night} night images to {out}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("dataset", help="synthetic shapes detection dataset")
    sub = p.add_subparsers(dest="dataset_command", required=True)
    g = sub.add_parser("generate", help="render a split: images/, labels/ (YOLO), annotations.json (COCO)")
    g.add_argument("--out", required=True)
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--day", type=int, default=50)
    g.add_argument("--night", type=int, default=50)
    g.add_argument("--sizes", default="mixed", choices=sorted(SIZES))
    g.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    g.set_defaults(func=_generate)
