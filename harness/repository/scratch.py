"""A user's repository is read-only to the harness: everything runs on a scratch copy, and a
fingerprint (every path, its type, mode and content hash) proves the original was not touched."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from harness.paths import cache_dir


def fingerprint(root: Path) -> dict[str, str]:
    root = Path(root)
    prints: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            info = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                prints[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISDIR(info.st_mode):
                prints[rel] = f"dir:{stat.S_IMODE(info.st_mode):o}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                prints[rel] = f"file:{stat.S_IMODE(info.st_mode):o}:{digest}"
    return prints


def scratch_copy(source: Path, parent: Path | None = None) -> Path:
    """Copy a repository somewhere disposable; links are kept as links (the config suite judges
    them) and nothing is ever written back."""
    source = Path(source).resolve()
    if not source.is_dir():
        raise FileNotFoundError(f"model repository {source} does not exist or is not a directory")
    parent = parent or cache_dir("scratch")
    target = Path(tempfile.mkdtemp(prefix=f"{source.name}-", dir=parent))
    shutil.copytree(source, target / "models", symlinks=True)
    return target / "models"
