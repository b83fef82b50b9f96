"""Schema: config.pbtxt parses as ModelConfig and follows Triton's rules (batching, instances,
version policy, ensemble wiring), including the ones Triton itself does not enforce at load."""

from harness.checks.schema import check_schema


def test_schema(entry, judge):
    judge(check_schema, entry)
