"""The letterbox suite tests one implementation, chosen by `--letterbox-impl MODULE:ATTR`.

The default is the harness's own (the one the reference models serve with); pointing the option at
a module in fixtures/letterbox/ runs the same properties against a known-broken variant, which is
how tests/ proves each property catches its bug. Pass the option together with this folder
(`pytest suites/letterbox --letterbox-impl ...`) so pytest loads this conftest before parsing.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from harness.hypothesis_profiles import load_profile

DEFAULT_IMPL = "harness.vision.letterbox:LETTERBOX"

load_profile()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("yts-letterbox", "yolo-triton-suite letterbox suite")
    group.addoption(
        "--letterbox-impl",
        default=DEFAULT_IMPL,
        metavar="MODULE:ATTR",
        help=f"letterbox implementation under test, an object like harness.vision.letterbox.Letterbox "
        f"(default {DEFAULT_IMPL})",
    )


def load_impl(spec: str):
    """'package.module:ATTR' or 'path/to/file.py:ATTR' -> the object; a clear error for a malformed or missing name."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise pytest.UsageError(f"--letterbox-impl wants MODULE:ATTR, got {spec!r}")
    try:
        if module_name.endswith(".py"):  # a file path: fixtures/letterbox/pad_zero.py:LETTERBOX
            spec_ = importlib.util.spec_from_file_location(Path(module_name).stem, module_name)
            if spec_ is None or not Path(module_name).is_file():
                raise ImportError(f"no such file {module_name}")
            module = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        return getattr(module, attr)
    except (ImportError, AttributeError) as error:
        raise pytest.UsageError(f"--letterbox-impl {spec!r}: {error}") from error


IMPL_KEY = pytest.StashKey[object]()


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the option once, up front: a bad MODULE:ATTR is a usage error, not 11 test errors."""
    config.stash[IMPL_KEY] = load_impl(config.getoption("letterbox_impl", default=DEFAULT_IMPL))


@pytest.fixture(scope="session")
def letterbox_impl(request: pytest.FixtureRequest):
    """The implementation under test (hypothesis tests need a session-scoped fixture)."""
    return request.config.stash[IMPL_KEY]
