"""Which version's files a served model's answers match, when its repository folder holds several versions
with different model files. A version whose model.py opens another version's weights (a path written when
there was one version) answers like that version; compared with its own file it shows only as missed boxes
or tensors out of tolerance. So when served-vs-local fails, every other version's file is run by the same
local twin and judged at the same tolerance, and the message says which one the answers match."""

from __future__ import annotations

import filecmp
from pathlib import Path
from typing import Callable

from harness.accuracy.runner import Run


def version_match(artifacts: dict[int, Path], compared: Path, run_twin: Callable[[Path], Run],
                  failures_against: Callable[[Run], list[str]]) -> list[str]:
    """The line naming the version whose file the served answers match (`failures_against` its local run
    finds nothing), or that they match none; [] when the model has no other version with another file.
    `compared` is the file the failing check ran locally (the highest version's: unversioned requests reach it)."""
    served = next((v for v, path in artifacts.items() if Path(path) == Path(compared)), None)
    if served is None:
        return []
    others = {v: path for v, path in sorted(artifacts.items())
              if v != served and not filecmp.cmp(path, compared, shallow=False)}
    if not others:
        return []
    where = lambda v: "/".join(Path(artifacts[v]).parts[-3:])  # noqa: E731  (MODEL/VERSION/FILE: an ensemble's are its step's)
    matching = [v for v, path in others.items() if not failures_against(run_twin(path))]
    if not matching:
        return [f"the answers match no version's model file either ({', '.join(where(v) for v in others)}, run "
                f"locally, {'differ' if len(others) > 1 else 'differs'} too)"]
    versions = f"version{'s' if len(matching) > 1 else ''} {' and '.join(map(str, matching))}"
    return [f"the answers match the model file of {versions} ({', '.join(map(where, matching))}), not version "
            f"{served}'s ({where(served)}), which unversioned requests reach: version {served} serves another "
            "version's files"]
