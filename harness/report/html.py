"""report.html: one self-contained file a person can read and forward — no external resources; plots
and pictures are inlined as data: URIs."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:13px}th{background:#eee}
.passed{color:#176f2c}.failed,.error{color:#b00020;font-weight:bold}.not-tested{color:#8a6d00}.interrupted{color:#6a1b9a}
.verdict{font-size:20px;padding:10px;border:2px solid}pre{white-space:pre-wrap;margin:0}img{max-width:100%}
tr.first-divergent td,tr.first-divergent th{background:#fde7e9}"""
DIAGNOSE_NAME = "diagnose.json"  # `yts diagnose --report-dir D` / `yts certify --diagnose`: the ablation ladder


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def verdict_plot(checks: list[dict]) -> str:
    counts = defaultdict(Counter)
    for check in checks:
        counts[check["suite"]][check["verdict"]] += 1
    suites = sorted(counts)
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.4 * len(suites)))
    left = [0] * len(suites)
    for verdict, colour in (("passed", "#2e7d32"), ("failed", "#c62828"), ("error", "#6a1b9a"), ("not tested", "#f9a825"), ("not applicable", "#9e9e9e"), ("interrupted", "#000000")):
        values = [counts[s][verdict] for s in suites]
        ax.barh(suites, values, left=left, color=colour, label=verdict)
        left = [a + b for a, b in zip(left, values)]
    ax.set_xlabel("checks")
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def performance_plot(checks: list[dict]) -> str | None:
    """Throughput against p95 latency for every check that measured both."""
    points = [(c["values"]["p95_ms"], c["values"]["throughput"], c["id"].split("::")[-1]) for c in checks
              if isinstance(c["values"].get("p95_ms"), (int, float)) and isinstance(c["values"].get("throughput"), (int, float))]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for latency, throughput, label in points:
        ax.scatter(latency, throughput)
        ax.annotate(label, (latency, throughput), fontsize=7)
    ax.set_xlabel("p95 latency (ms)")
    ax.set_ylabel("throughput (inferences/s)")
    return _png(fig)


def _pictures(report_dir: Path) -> list[tuple[str, str]]:
    return [(p.name, "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode())
            for p in sorted(report_dir.rglob("*.png"))]


def _check_table(items: list[dict]) -> str:
    rows = ["<table><tr><th>check</th><th>verdict</th><th>s</th><th>values</th><th>message</th></tr>"]
    for c in items:
        values = ", ".join(f"{k}={v}" for k, v in c["values"].items())
        rows.append(f"<tr><td>{html.escape(c['id'])}</td><td class='{c['verdict'].replace(' ', '-')}'>{c['verdict']}</td>"
                    f"<td>{c['duration_s']:.2f}</td><td>{html.escape(values)}</td><td><pre>{html.escape(c['message'])}</pre></td></tr>")
    return "\n".join(rows + ["</table>"])


def _model_table(models: dict) -> str:
    """One row per model, one column per suite: its checks' verdicts, the worst first."""
    suites = sorted({suite for row in models.values() for suite in row})
    rows = ["<h2>Per model</h2><table id='models'><tr><th>model</th>" + "".join(f"<th>{html.escape(s)}</th>" for s in suites) + "</tr>"]
    for model, row in models.items():
        cells = []
        for suite in suites:
            cell = row.get(suite, {})
            worst = next(iter(cell), "")
            text = ", ".join(f"{n} {v}" for v, n in cell.items())
            cells.append(f"<td class='{worst.replace(' ', '-')}'>{html.escape(text)}</td>")
        rows.append(f"<tr><th>{html.escape(model)}</th>{''.join(cells)}</tr>")
    return "\n".join(rows + ["</table>"])


def _share(value) -> str:
    return "" if value is None else f"{value:.0%}"


def ladder_section(ladder: dict) -> str:
    """The ablation ladder (harness.diagnose.ladder's as_dict): one row per rung, what it switched on, how
    many of the FP32 reference's boxes it found again and how many it added, against its precision's
    tolerance; the first divergent rung highlighted, the ladder's verdict above."""
    out = ["<h2 id='ablation-ladder'>Ablation ladder</h2>"]
    if ladder.get("error"):
        return out[0] + f"<p id='ladder-verdict' class='error'>The ladder did not run: {html.escape(ladder['error'])}</p>"
    first = ladder.get("first_divergent")
    out.append(f"<p>Repository {html.escape(str(ladder.get('repository', '')))}, raw model "
               f"{html.escape(str(ladder.get('raw_model', '')))}: each rung switches one optimisation back on, "
               "cumulatively, and is judged against the FP32 ONNX run locally (<code>yts diagnose</code>).</p>")
    if ladder.get("after"):
        out.append("<p>Run by <code>yts certify --diagnose</code> because these accuracy checks failed: "
                   f"{html.escape(', '.join(ladder['after']))}.</p>")
    out.append(f"<p id='ladder-verdict' class='{'failed' if first else 'passed'}'>{html.escape(ladder.get('verdict', ''))}</p>")
    tolerance = ladder.get("tolerance", {})
    rows = ["<table id='ladder'><tr><th>#</th><th>rung</th><th>switched on</th><th>precision</th><th>matched</th>"
            "<th>extra</th><th>tolerance</th><th>per model</th><th>result</th></tr>"]
    for index, rung in enumerate(ladder.get("rungs", []), 1):
        limits = tolerance.get(rung.get("precision"), {})
        limit = (f"&ge; {_share(limits['matched_at_least'])} matched, &le; {_share(limits['extra_at_most'])} extra"
                 if limits and not rung.get("skipped") else "")
        per_model = "; ".join(f"{m}: {_share(v['matched'])} matched, {_share(v['extra'])} extra"
                              for m, v in rung.get("per_model", {}).items())
        if rung.get("skipped"):
            result, css = f"not run: {rung['skipped']}", "not-tested"
        elif rung.get("diverges"):
            result, css = ("FIRST DIVERGENT" if rung["name"] == first else "diverges"), "failed"
        else:
            result, css = "agrees", "passed"
        rows.append(f"<tr{' class=first-divergent' if rung['name'] == first else ''}><td>{index}</td>"
                    f"<th>{html.escape(rung['name'])}</th><td>{html.escape(rung.get('change') or '')}</td>"
                    f"<td>{html.escape(rung.get('precision', ''))}</td><td>{_share(rung.get('matched'))}</td>"
                    f"<td>{_share(rung.get('extra'))}</td><td>{limit}</td><td>{html.escape(per_model)}</td>"
                    f"<td class='{css}'>{html.escape(result)}</td></tr>")
    return "\n".join(out + rows + ["</table>"])


def ladder_of(report_dir: Path, report: dict | None = None) -> dict | None:
    """The ladder run for this report: diagnose.json in the report directory, else report.json's "diagnose"."""
    path = Path(report_dir) / DIAGNOSE_NAME
    if path.is_file():
        return json.loads(path.read_text())
    return (report or {}).get("diagnose")


def render_diagnose(report_dir: Path, ladder: dict) -> Path:
    """diagnose.html: the ablation ladder alone, in report.html's style (for a report directory without a run)."""
    page = ["<!doctype html><html><head><meta charset='utf-8'><title>yolo-triton-suite ablation ladder</title>",
            f"<style>{STYLE}</style></head><body><h1>yolo-triton-suite: ablation ladder</h1>",
            ladder_section(ladder), "</body></html>"]
    path = Path(report_dir) / "diagnose.html"
    path.write_text("\n".join(page))
    return path


def verdict_line_of(report_dir: Path) -> str | None:
    """The verdict report.html was rendered with (to render it again with the same verdict)."""
    path = Path(report_dir) / "report.html"
    found = re.search(r"<pre class='verdict' id='verdict'[^>]*>(.*?)</pre>", path.read_text(), re.S) if path.is_file() else None
    return html.unescape(found.group(1)) if found else None


def render(report_dir: Path, verdict_line: str) -> Path:
    report_dir = Path(report_dir)
    report = json.loads((report_dir / "report.json").read_text())
    checks = report["checks"]
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>yolo-triton-suite report</title>",
           f"<style>{STYLE}</style></head><body><h1>yolo-triton-suite report</h1>"]
    colour = "#176f2c" if verdict_line.startswith("CERTIFIED") else "#8a5a00" if verdict_line.startswith("PARTIAL") else "#b00020"
    out.append(f"<pre class='verdict' id='verdict' style='border-color:{colour};color:{colour}'>{html.escape(verdict_line)}</pre>")
    if report.get("complete") is False:
        of = f"{report.get('ran')} of {report.get('collected')}" if report.get("collected") is not None else str(report.get("ran"))
        out.append(f"<p id='incomplete'><b>Partial report</b>: the run did not finish; {html.escape(of)} tests ran "
                   "(below: what they found; tests that did not run are not listed).</p>")
    out.append("<h2>Environment</h2><table>" + "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in report["environment"].items()) + "</table>")
    out.append(f"<h2>Summary</h2><img id='verdict-plot' alt='verdicts per suite' src='{verdict_plot(checks)}'>")
    if perf := performance_plot(checks):
        out.append(f"<h2>Throughput and latency</h2><img id='performance-plot' alt='throughput vs p95' src='{perf}'>")
    if report.get("models"):
        out.append(_model_table(report["models"]))
    if ladder := ladder_of(report_dir, report):
        out.append(ladder_section(ladder))
    by_suite = defaultdict(list)
    for check in checks:
        by_suite["harness self-checks (the harness's own parts, not the repository)" if check.get("harness_self_check")
                 else check["suite"]].append(check)
    for suite, items in sorted(by_suite.items(), key=lambda kv: (kv[0].startswith("harness self"), kv[0])):
        out.append(f"<h2>{html.escape(suite)}</h2>" + _check_table(items))
    pictures = _pictures(report_dir)
    if pictures:
        out.append("<h2>Pictures</h2>")
        out += [f"<figure><img alt='{html.escape(n)}' src='{src}'><figcaption>{html.escape(n)}</figcaption></figure>" for n, src in pictures]
    if report.get("artifacts"):
        out.append("<h2>Artifacts (sha256)</h2><table>" + "".join(
            f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in sorted(report["artifacts"].items())) + "</table>")
    out.append("</body></html>")
    path = report_dir / "report.html"
    path.write_text("\n".join(out))
    return path
