"""The GPU machine's side and the probes the suites do not make (README.md here)."""
