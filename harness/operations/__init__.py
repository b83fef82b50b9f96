"""Operational checks: where a model's time goes (stage metrics), the memory a repository holds once
loaded, whether that memory grows with every request served, and whether one model's load starves
another's (suites/operations)."""
