"""What a check reports: which check, which model, which file, and in plain words what was expected
and what was found there."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    check: str
    model: str
    file: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.model}: {self.file}: {self.message}"


def triton_says(text: str) -> str:
    """Triton's own wording of a refusal, quoted, so the finding can be matched to the server log."""
    return f'Triton: "{text}"'


class NotTestedWarning(UserWarning):
    """What a passing check read but no check judges (a segmentation head's masks): said in the warnings
    summary, so a pass never claims more than was tested."""


class NotApplicable(Exception):
    """The check has nothing to judge for this model; the reason says why (a skip, not a pass)."""


def format_findings(findings: list[Finding]) -> str:
    count = len(findings)
    head = f"{count} finding{'s' if count != 1 else ''}:"
    return "\n".join([head, *(f"  - {finding}" for finding in findings)])
