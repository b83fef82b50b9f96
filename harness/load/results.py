"""Raw results first: every run is written to disk before any gate looks at it, and gates read the
file back, so a past run can be judged again (MLPerf's log + separate verifier)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.load.generator import LoadResult


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


def write_raw(directory: Path, name: str, data: dict) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_slug(name)}.json"
    path.write_text(json.dumps(data, indent=1, default=float))
    return path


def read_raw(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def load_result(data: dict) -> LoadResult:
    return LoadResult.from_dict(data)
