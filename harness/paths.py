"""Where the harness keeps what it builds: one cache root, overridable, never inside a user's tree."""

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_REPO_SOURCES = PROJECT_ROOT / "reference_repo"
FIXTURES = PROJECT_ROOT / "fixtures"


def cache_root() -> Path:
    """$YTS_CACHE beats the project-local .cache/ (ignored by git)."""
    root = Path(os.environ.get("YTS_CACHE", PROJECT_ROOT / ".cache"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def one_builder(folder: Path):
    """Held while `folder` is built: concurrent runs (pytest-xdist workers, two users' runs on one cache) wait
    for the first builder and then find its result, instead of each building the same thing. The lock file
    sits beside the folder and stays (an empty file; the lock itself dies with its holder)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
