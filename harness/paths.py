"""Where the harness keeps what it builds: one cache root, overridable, never inside a user's tree."""

import os
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
