"""What one pytest run knows about the repository under test, kept in the config's stash and read by
whoever needs it: the plugin, the availability records, the report collector, the suites. Its own module,
so that those never import the plugin back (they did, in a circle: plugin -> availability -> plugin)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

COLLECTOR = pytest.StashKey["ReportCollector"]()
_COVERAGE = pytest.StashKey["Coverage"]()


@dataclass
class Coverage:
    """What the run served, which model each check is about, and why a model was not tested: one record, filled
    where each fact is learnt (harness.availability as it decides, the plugin's server as it starts, the report
    collector at collection) and written whole into report.json, which the verdict (harness.report.gate) reads."""

    repository_models: list[str] = field(default_factory=list)  # every model of the repository (coverage's B)
    declared_skip: list[str] = field(default_factory=list)  # models the manifest declares `skip`
    models: dict[str, str] = field(default_factory=dict)  # test id -> the model it is about
    uses_server: set[str] = field(default_factory=set)  # checks of the whole server (triton_server, no model)
    served: set[str] | None = None  # models of the repository the server served (None: none started)
    not_servable: dict[str, str] = field(default_factory=dict)  # model -> why this host cannot serve it, way out
    adapter_served: dict[str, str] = field(default_factory=dict)  # model -> "served through the ONNX Runtime adapter; ..."
    adapter_refused: dict[str, str] = field(default_factory=dict)  # model -> why the adapter did not serve it


def coverage(config: pytest.Config) -> Coverage:
    return config.stash.setdefault(_COVERAGE, Coverage())
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
