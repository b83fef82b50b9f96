"""Root conftest: the harness is a pytest plugin (harness.plugin, registered through the pytest11
entry point when the project is installed); loading it here too makes a plain checkout work."""

import importlib.metadata

try:
    importlib.metadata.distribution("yolo-triton-suite")
    pytest_plugins: list[str] = []
except importlib.metadata.PackageNotFoundError:
    pytest_plugins = ["harness.plugin"]
