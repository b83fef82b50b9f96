"""What one pytest run knows about the repository under test, kept in the config's stash and read by
whoever needs it: the plugin, the availability records, the report collector, the suites. Its own module,
so that those never import the plugin back (they did, in a circle: plugin -> availability -> plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

COLLECTOR = pytest.StashKey["ReportCollector"]()
_MANIFEST = pytest.StashKey["Manifest"]()
_SOURCE = pytest.StashKey[Path]()


def source_repository(config: pytest.Config) -> Path:
    """The repository the user pointed at, or the reference one built for this machine; found once per run
    (suites ask at collection, each time they parametrize, and the reference's key hashes its artifacts)."""
    if _SOURCE not in config.stash:
        repo = config.getoption("--repo")
        if repo is not None:
            config.stash[_SOURCE] = Path(repo).resolve()
        else:
            from harness.hostinfo import reference_device
            from harness.reference import build_reference_repository

            config.stash[_SOURCE] = build_reference_repository(reference_device(config.getoption("--device"))[0])
    return config.stash[_SOURCE]


def manifest_for(config: pytest.Config):
    """The declarations about the repository under test (harness.repository.manifest), read once; usable
    at collection time, where suites parametrize over models."""
    if _MANIFEST not in config.stash:
        from harness.repository.manifest import ManifestError, load_manifest

        try:
            config.stash[_MANIFEST] = load_manifest(source_repository(config), config.getoption("--manifest"),
                                                    config.getoption("--model"), config.getoption("--imgsz"),
                                                    config.getoption("--nc"), config.getoption("--precision"))
        except ManifestError as error:
            raise pytest.UsageError(str(error)) from None
    return config.stash[_MANIFEST]
