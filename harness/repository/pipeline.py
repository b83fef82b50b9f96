"""Pipeline steps: models of a repository reached only through an ensemble (a postprocess reading raw
outputs and letterbox metadata). Every suite drives them through their ensemble, never with made-up
standalone requests; a detector an ensemble also feeds (raw or e2e by its layout or declaration) is
not one of them."""

from __future__ import annotations

from pathlib import Path


def pipeline_step_of(repository: Path, name: str, manifest=None) -> str | None:
    """The ensemble whose other steps feed every input of `name`, when `name` has no role of its own."""
    from harness.checks.live import internal_step_of
    from harness.checks.model import load_entry
    from harness.repository.layouts import read_layout

    entry = load_entry(Path(repository), name)
    if manifest is not None and manifest.role(name) in ("raw", "e2e"):
        return None
    config = entry.config or entry.declared  # completed where the backend completes it
    if config is not None and read_layout(config, manifest.layout(name) if manifest is not None else None,
                                          name).role is not None:
        return None
    return internal_step_of(entry)
