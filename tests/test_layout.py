"""Keeps the layout honest: every suite has its README (and a line in the top README), its marker,
and broken fixtures that make it fail."""

import configparser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted(p.name for p in (ROOT / "suites").iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _markers() -> set[str]:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    return {line.split(":")[0].strip() for line in ini["pytest"]["markers"].splitlines() if line.strip()}


@pytest.mark.parametrize("suite", SUITES)
def test_suite_has_readme_marker_and_fixtures(suite):
    assert (ROOT / "suites" / suite / "README.md").is_file(), f"suites/{suite} has no README.md"
    assert f"suites/{suite}" in (ROOT / "README.md").read_text(), f"README.md does not mention suites/{suite}"
    assert suite in _markers(), f"pytest.ini declares no marker {suite!r}"
    fixtures = ROOT / "fixtures" / suite
    assert fixtures.is_dir() and any(fixtures.iterdir()), f"fixtures/{suite} holds no broken inputs"


def test_there_are_suites():
    assert SUITES, "no suites found"


def test_no_test_module_name_is_shared_between_tests_and_suites():
    # Both trees are rootdir-relative without packages: pytest imports test modules by basename, so a
    # second module of the same name (a pytester run of a suite from a test) fails "import file mismatch".
    ours = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    theirs = {p.name for p in (ROOT / "suites").rglob("test_*.py")}
    assert not ours & theirs, f"tests/ and suites/ share module names: {sorted(ours & theirs)}"
