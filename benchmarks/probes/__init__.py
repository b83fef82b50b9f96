"""Probes of what no served run can show, one module each (benchmarks/README.md lists them)."""
