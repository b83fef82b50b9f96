"""`yts`: the harness's command line. Each subcommand lives in the module that owns the work; a module
joins by exposing `register(subparsers)` and being listed in COMMANDS."""

import argparse
import importlib
import sys

COMMANDS = [
    "harness.dataset.cli",
    "harness.training",
    "harness.engines.cli",
    "harness.reference.cli",
    "harness.report.certify",
    "harness.checks.triton_qa",
    "harness.checks.triton_qa_live",
    "harness.load.cli",
    "harness.diagnose.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="yts", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
