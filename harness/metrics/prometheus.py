"""Triton's metrics endpoint as data: scraped, parsed with prometheus_client's own text parser (so
"parses as Prometheus text" means what Prometheus means), and diffed between two scrapes, so a check
can say "nv_inference_count moved by exactly 4" instead of reading absolute values."""

from __future__ import annotations

from dataclasses import dataclass

import requests
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset]


class MetricsFormatError(ValueError):
    """The endpoint's text is not valid Prometheus exposition format."""


@dataclass(frozen=True)
class Snapshot:
    samples: dict[Key, float]
    types: dict[str, str]  # family name -> counter | gauge | histogram | summary | unknown

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def value(self, name: str, **labels: str) -> float:
        """Sum over every sample of `name` (or its `_total` form: the parser adds it to counters) whose
        labels include `labels`; 0 when none matches."""
        wanted = set(labels.items())
        names = {name, name + "_total"} if not name.endswith("_total") else {name}
        return sum(v for (n, ls), v in self.samples.items() if n in names and wanted <= ls)

    def has(self, name: str, **labels: str) -> bool:
        wanted = set(labels.items())
        names = {name, name + "_total"}
        return any(n in names and wanted <= ls for n, ls in self.samples)


def parse(text: str) -> Snapshot:
    samples: dict[Key, float] = {}
    types: dict[str, str] = {}
    try:
        for family in text_string_to_metric_families(text):
            types[family.name] = family.type
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    except (ValueError, TypeError, IndexError) as error:
        raise MetricsFormatError(f"metrics text does not parse as Prometheus exposition format: {error}") from error
    return Snapshot(samples, types)


def scrape(endpoint: str, timeout: float = 10.0) -> Snapshot:
    """endpoint: HOST:PORT of Triton's metrics service (Endpoints.metrics)."""
    response = requests.get(f"http://{endpoint}/metrics", timeout=timeout)
    response.raise_for_status()
    return parse(response.text)


def delta(before: Snapshot, after: Snapshot, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)
