# Two commands from a fresh clone: `make conformance` (the suites on the bundled reference repository,
# embedded Triton server) and `make test` (the harness's own tests). Both create .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: conformance test venv clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

venv: $(VENV)/.installed

# The 15 slowest checks printed, so a run's time is accounted for (issue #34's budget).
conformance: venv
	$(VENV)/bin/pytest suites --durations=15 $(ARGS)

# Four pytest-xdist workers on 2 cores, each test file on one (its module-scoped servers start once): the tests wait
# on servers much of the time, and a fourth worker fills it (three: 793.9 s, 1,264 CPU-s; four, after the operations
# tests' 89 CPU-s were cut: 659.5 s, 1,175 CPU-s, 89 % of both cores; one machine, an hour apart); 15 slowest printed.
test: venv
	$(VENV)/bin/pytest tests -n 4 --dist loadfile --durations=15 $(ARGS)

clean:
	rm -rf $(VENV) .cache
