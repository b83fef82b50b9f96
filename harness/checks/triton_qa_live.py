"""The offline verdicts on Triton's QA corpus (harness.checks.triton_qa) cross-checked against a real
Triton: every in-scope case is laid out the way the QA runner lays it out and loaded, model by model,
through the repository API of the embedded server (or any launcher the harness offers that can control
its repository). Where the server decides the case — it loads it, or refuses it for a reason of its own
(an ensemble rule, a config refused before any backend is looked up) — its verdict must be the offline
one: refused ⇔ the offline checks find a cause, loaded ⇔ no finding. Where its only refusal is a backend
library it does not have (the embedded server has the Python backend only), it cannot decide, and the
case is listed as undecided, not compared.

One server per auto-complete mode, as Triton's QA runs them (noautofill_platform and special_cases with
`--disable-auto-complete-config`, the autofill groups with auto-complete on), in explicit model control
with nothing loaded at start, over one repository folder: for each case the folder is emptied, the case
laid out, each of its models loaded (the API's message kept, with the server log's error lines that name
the model, since the message is often only "failed to poll from model repository"), and every model the
server knows unloaded before the next case.

The embedded server is Triton 2.51; the corpus is 2.73's: whether the server's refusal carries the
corpus's `expected` text is reported apart from agreement, since wording (and the order of checks) may
differ between the two.

`yts triton-qa-live` prints the table."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import requests

from harness.checks.live import MISSING_BACKEND, server_log_errors
from harness.checks.triton_qa import DEFAULT_CORPUS, Case, Verdict, cases, grep_pattern, judge, lay_out

if TYPE_CHECKING:
    from harness.servers import TritonServer

# What Triton's QA runs with auto-complete disabled (README of the corpus).
NO_AUTOCOMPLETE_GROUPS = ("noautofill", "special")
NO_AUTOCOMPLETE_FLAG = "--disable-auto-complete-config"
LOAD_TIMEOUT = 120.0  # a Python model's stub takes seconds; a failing load answers at once
OFFLINE_FINDS = ("caught", "other cause", "false finding")


def autocomplete(case: Case) -> bool:
    return not case.group.startswith(NO_AUTOCOMPLETE_GROUPS)


@dataclass
class ModelLoad:
    name: str
    loaded: bool
    message: str = ""  # the load API's error message
    log: list[str] = field(default_factory=list)  # the server log's error lines naming the model

    @property
    def missing_backend(self) -> str | None:
        """The backend whose library the server lacks, when that is the whole refusal."""
        found = MISSING_BACKEND.search(self.message)
        return found.group(1) if found else None

    @property
    def text(self) -> str:
        return "\n".join([self.message, *self.log]).strip()


@dataclass
class LiveRow:
    case: Case
    offline: Verdict
    loads: list[ModelLoad]

    @property
    def server(self) -> str:
        """refused (for a reason of its own) | loaded | undecided (only a missing backend refused)."""
        refused = [load for load in self.loads if not load.loaded]
        if any(load.missing_backend is None for load in refused):
            return "refused"
        return "undecided" if refused else "loaded"

    @property
    def missing_backends(self) -> list[str]:
        return sorted({load.missing_backend for load in self.loads if not load.loaded and load.missing_backend})

    @property
    def offline_finds(self) -> bool:
        return self.offline.outcome in OFFLINE_FINDS

    @property
    def agreement(self) -> str:
        """agree | disagree | undecided."""
        if self.server == "undecided":
            return "undecided"
        return "agree" if (self.server == "refused") == self.offline_finds else "disagree"

    @property
    def server_text(self) -> str:
        """Triton's refusal: each refused model's message and log lines (missing backends included)."""
        return "\n".join(f"{load.name}: {load.text}" for load in self.loads if not load.loaded)

    @property
    def wording(self) -> str | None:
        """For a case Triton's QA refuses and this server refuses: whether the server's text carries the
        corpus's `expected` text (Triton 2.73) — 'same' or 'differs'; None otherwise."""
        if self.server != "refused" or self.case.accept or not self.case.expected:
            return None
        text = self.server_text
        return "same" if any(grep_pattern(expected).search(text) for expected in self.case.expected) else "differs"


# (repository folder, auto-complete on?) -> a started server in explicit mode with nothing loaded
ServerFactory = Callable[[Path, bool], "TritonServer"]


def process_server(repository: Path, autocomplete: bool, **settings) -> TritonServer:
    """The embedded server (the process launcher) in explicit mode with nothing loaded at start."""
    from harness.servers import ServerSettings, create_server

    return create_server("process", ServerSettings(
        repository=repository, load_models=(), extra_args=() if autocomplete else (NO_AUTOCOMPLETE_FLAG,),
        **settings)).start()


def run(corpus: Path = DEFAULT_CORPUS, *, server_factory: ServerFactory | None = None,
        select: Callable[[Case], bool] | None = None) -> tuple[list[LiveRow], float]:
    """Every in-scope case of the corpus (those `select` keeps) judged offline and by the server."""
    in_scope = [case for case in cases(corpus) if not case.out_of_scope and (select is None or select(case))]
    return cross_check(in_scope, server_factory=server_factory)


def cross_check(chosen: list[Case], *, server_factory: ServerFactory | None = None) -> tuple[list[LiveRow], float]:
    """The cases judged offline and by the server (one per auto-complete mode); rows in the cases' order."""
    started = time.perf_counter()
    server_factory = server_factory or process_server
    rows: dict[str, LiveRow] = {}
    with tempfile.TemporaryDirectory(prefix="yts-triton-qa-live-") as scratch:
        scratch = Path(scratch)
        offline = {case.key: judge(case, scratch / "offline") for case in chosen}
        repository = scratch / "models"
        repository.mkdir()
        for mode in (False, True):
            batch = [case for case in chosen if autocomplete(case) == mode]
            if not batch:
                continue
            server = server_factory(repository, mode)
            try:
                for case in batch:
                    rows[case.key] = LiveRow(case, offline[case.key], _serve(server, repository, case))
            finally:
                server.stop()
    return [rows[case.key] for case in chosen], time.perf_counter() - started


def _serve(server, repository: Path, case: Case) -> list[ModelLoad]:
    from harness.checks.model import list_models

    url = server.endpoints.http_url
    for path in repository.iterdir():  # empty it, keep the folder (a container mounts it)
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    lay_out(case, repository)
    log = _LogCursor(server)
    loads: list[ModelLoad] = []
    names = list_models(repository)
    try:
        for name in names:
            response = requests.post(f"{url}/v2/repository/models/{name}/load", timeout=LOAD_TIMEOUT)
            if response.status_code == 200:
                loads.append(ModelLoad(name, True))
                continue
            try:
                message = response.json().get("error", response.text)
            except ValueError:
                message = response.text
            loads.append(ModelLoad(name, False, message.strip()))
        lines = log.new_lines()
        for load in loads:
            if not load.loaded:  # once each: a step's failure is logged again when its ensemble tries it
                load.log = list({line.split("] ", 1)[-1]: line for line in server_log_errors(lines, load.name)}.values())
    finally:
        _unload_everything(server, names)
    return loads


def _unload_everything(server, names: list[str], timeout: float = 60.0) -> None:
    """Unload every model of the case and every model the server lists — refused ones too, or the next
    case meets their leftovers (an ensemble refused earlier is re-validated when a model of the same
    name loads again) — and wait until none is READY, LOADING or UNLOADING."""
    url = server.endpoints.http_url
    index = requests.post(f"{url}/v2/repository/index", json={}, timeout=10).json()
    for name in sorted(set(names) | {entry["name"] for entry in index}):
        requests.post(f"{url}/v2/repository/models/{name}/unload",
                      json={"parameters": {"unload_dependents": True}}, timeout=LOAD_TIMEOUT)
    deadline = time.monotonic() + timeout
    while True:
        index = requests.post(f"{url}/v2/repository/index", json={}, timeout=10).json()
        busy = [(entry["name"], entry["state"]) for entry in index
                if entry.get("state") in ("READY", "LOADING", "UNLOADING")]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Triton did not unload {busy} in {timeout:.0f} s")
        time.sleep(0.05)


class _LogCursor:
    """The server log's lines written since the cursor was made: by file offset where the launcher keeps a
    log file, else the lines of the log tail not seen before (Triton's lines carry microsecond stamps)."""

    def __init__(self, server):
        self.server = server
        self.path = server.log_path
        if self.path is not None:
            self.offset = self.path.stat().st_size if self.path.exists() else 0
        else:
            self.seen = set(server.log_tail(2000).splitlines())

    def new_lines(self) -> str:
        if self.path is not None:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                return log.read().decode(errors="replace")
        return "\n".join(line for line in self.server.log_tail(2000).splitlines() if line not in self.seen)


COLUMNS = ("cases", "undecided", "decided", "agree", "disagree", "same text", "text differs")


def table(rows: list[LiveRow]) -> list[tuple[str, Counter]]:
    counts: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        for key in (row.case.group, "all"):
            counted = counts[key]
            counted["cases"] += 1
            counted[row.agreement] += 1
            if row.agreement != "undecided":
                counted["decided"] += 1
            if row.wording:
                counted["same text" if row.wording == "same" else "text differs"] += 1
    return sorted(counts.items(), key=lambda item: (item[0] == "all", item[0]))


def disagreements(rows: list[LiveRow]) -> list[LiveRow]:
    return [row for row in rows if row.agreement == "disagree"]


def render(rows: list[LiveRow], seconds: float, *, details: bool = False) -> str:
    lines = [f"{'group':<42} " + " ".join(f"{c:>12}" for c in COLUMNS)]
    for key, counts in table(rows):
        lines.append(f"{key:<42} " + " ".join(f"{counts.get(c, 0):>12}" for c in COLUMNS))
    total = Counter(row.agreement for row in rows)
    verdicts = Counter(row.server for row in rows)
    backends = Counter(backend for row in rows if row.server == "undecided" for backend in row.missing_backends)
    lines.append(f"\n{len(rows)} in-scope cases in {seconds:.1f} s: the server decides "
                 f"{len(rows) - total['undecided']} (refuses {verdicts['refused']}, loads {verdicts['loaded']}), "
                 f"agrees with the offline verdict on {total['agree']}, disagrees on {total['disagree']}; "
                 f"undecided {total['undecided']}"
                 + (" (missing backend library: " + ", ".join(f"{name} {count}" for name, count in sorted(backends.items()))
                    + ")" if backends else ""))
    lines.append("'same text': the server's refusal carries the corpus's expected text (Triton 2.73); "
                 "'text differs': it refuses for its own wording or reason (the embedded server is 2.51)")
    for row in disagreements(rows):
        lines.append(f"\nDISAGREE: {row.case.key}: Triton {row.server}, offline {row.offline.outcome}")
        lines += _evidence(row)
    if details:
        for row in rows:
            if row.wording == "differs":
                lines.append(f"\ntext differs: {row.case.key}")
                lines += _evidence(row)
        for row in rows:
            if row.server == "undecided":
                lines.append(f"undecided: {row.case.key} (no {', '.join(row.missing_backends)} backend)")
    return "\n".join(lines)


def _evidence(row: LiveRow) -> Iterator[str]:
    yield from (f"  expected: {text}" for text in row.case.expected)
    yield from (f"  server:   {line}" for line in row.server_text.splitlines())
    yield from (f"  offline:  {finding}" for finding in row.offline.findings)


def main(args) -> int:
    import sys

    from harness.servers import ServerStartError
    from harness.servers.serverfiles import ServerFilesMissing

    try:
        rows, seconds = run(Path(args.corpus))
    except (FileNotFoundError, ServerFilesMissing, ServerStartError) as error:
        print(f"yts triton-qa-live: {error}", file=sys.stderr)
        return 2
    print(render(rows, seconds, details=args.details))
    return 1 if disagreements(rows) else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("triton-qa-live", help="cross-check the offline verdicts on Triton's QA corpus "
                                                          "against the embedded Triton's (each case loaded)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS),
                        help=f"the corpus folder (holding qa/L0_model_config; default {DEFAULT_CORPUS})")
    parser.add_argument("--details", action="store_true",
                        help="also list every refusal whose wording differs from the corpus's, and the undecided cases")
    parser.set_defaults(func=main)
