"""Facts of the card and host a probe ran on, and the probe's JSON record. A number from the GPU machine
means nothing without the card (an H100 80GB or an H200 comes for the same request), its driver and SM
count, the torch/cuDNN it ran with, the host's cores and /dev/shm, and whether the machine's cv2 or
benchmarks/cv2_fallback was imported: every probe writes them beside its result, in one JSON record (`--out`,
`probe_arguments`). The suites' report.json names the GPU and driver only (harness.hostinfo); the rest only a
probe needs.

    python -m benchmarks.probes.card [--out FILE]"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_COMMANDS = {"nvidia_smi": ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
             "dev_shm": ["df", "-h", "/dev/shm"], "cpu_topology": ["lscpu", "--parse=CPU,CORE,SOCKET"]}
_MODULES = ("numpy", "onnx", "onnxruntime", "tritonclient", "grpc", "google.protobuf", "PIL", "pycocotools")


def facts() -> dict:
    """Versions, the GPU as torch and nvidia-smi see it, the host's cores and /dev/shm; what is missing is
    said, never fatal."""
    from harness.hostinfo import gpu_description

    info: dict = {"python": sys.version.split()[0], "platform": platform.platform(),
                  "cpus": len(os.sched_getaffinity(0)), **gpu_description()}
    for name in _MODULES:
        try:
            info[name] = getattr(__import__(name, fromlist=["__version__"]), "__version__", "present")
        except Exception as error:  # noqa: BLE001 -- recorded, not fatal
            info[name] = f"unavailable: {type(error).__name__}: {error}"
    try:
        import cv2

        info["cv2"] = cv2.__version__
        info["cv2_fallback"] = bool(getattr(cv2, "IS_YTS_FALLBACK", False))
    except Exception as error:  # noqa: BLE001
        info["cv2"] = f"unavailable: {type(error).__name__}: {error}"
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["cuda_device"] = {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                                   "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                                   "cudnn": torch.backends.cudnn.version()}
    except Exception as error:  # noqa: BLE001
        info["torch"] = f"unavailable: {type(error).__name__}: {error}"
    for label, command in _COMMANDS.items():
        try:
            info[label] = subprocess.run(command, capture_output=True, text=True, timeout=15).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as error:
            info[label] = f"unavailable: {error}"
    return info


def git_commit() -> str | None:
    """The tree measured: YTS_GIT_COMMIT where the copy has no .git (the device tool's)."""
    if os.environ.get("YTS_GIT_COMMIT"):
        return os.environ["YTS_GIT_COMMIT"]
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def write_record(out: Path, probe: str, args: argparse.Namespace, result: dict) -> dict:
    """OUT gets {probe, command, options, git commit, card, result}; returns it."""
    record = {"probe": probe, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "command": " ".join(sys.argv), "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "git_commit": git_commit(), "card": facts(), "result": result}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=str))
    return record


def probe_arguments(doc: str, out_required: bool = True) -> argparse.ArgumentParser:
    """A probe's command line: its docstring as the help, --out for its JSON record."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=out_required, help="the JSON record" + ("" if out_required else
                                                                                             " (default: print the facts)"))
    return parser


def int_list(text: str) -> list[int]:
    """'8,32,64' -> [8, 32, 64] (sorted, each once)."""
    return sorted({int(v) for v in text.split(",") if v.strip()})


def parse_args(argv=None) -> argparse.Namespace:
    return probe_arguments(__doc__, out_required=False).parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    print(json.dumps(write_record(args.out, "card", args, {})["card"] if args.out else facts(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
