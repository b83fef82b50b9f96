"""Offline and live checks of a Triton model repository: pure functions over a repository path (and,
for the live part, a running server) returning findings. The config suite turns them into tests;
anything else (a CLI, a report) can call them the same way.

Each check takes (repository, model) and returns a list of `Finding`s, or raises `NotApplicable`
when there is nothing it can judge (a TensorRT plan without TensorRT, a config another check already
found unreadable)."""

from harness.checks.findings import Finding, NotApplicable, format_findings
from harness.checks.model import ModelEntry, list_models, load_entry

__all__ = ["Finding", "NotApplicable", "format_findings", "ModelEntry", "list_models", "load_entry"]
