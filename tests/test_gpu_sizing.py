"""The GPU reference build sized from the card (harness.reference.gpu_sizing, issue 31 item 1): the
largest server the suites start, plus its yolo_e2e instances' capture peaks, keeps 20 % of the card free, on an
80 GB H100 and a 141 GB H200 alike; a card too small for one instance of each is refused with a reason.
The measurement itself needs a GPU (benchmarks/gpu_acceptance.sh); the rule is arithmetic, tested here."""

from __future__ import annotations

import pytest

from harness.reference.gpu_sizing import MAX_E2E, MAX_RAW, MIN_FREE, InstanceCost, largest_server, size

GIB = 1 << 30
H100, H200 = int(79.2 * GIB), int(139.8 * GIB)  # memory.total as the driver reports the cards


@pytest.mark.parametrize("total", [H100, H200], ids=["h100", "h200"])
@pytest.mark.parametrize("steady, peak", [(1.6, 3.0), (3.5, 7.4)], ids=["lean", "heavy"])
def test_the_largest_server_leaves_a_fifth_of_the_card_free(total, steady, peak):
    cost = InstanceCost(steady=int(steady * GIB), peak=int(peak * GIB))
    sizing = size(total, int(0.6 * GIB), cost, "card")
    assert 1 <= sizing.raw_instances <= MAX_RAW and 1 <= sizing.e2e_instances <= MAX_E2E
    held = sizing.used_before + sizing.largest_server + sizing.e2e_instances * (cost.peak - cost.steady)
    assert held <= (1 - MIN_FREE) * total, sizing.record()
    record = sizing.record()
    assert record["free_with_largest_server"] >= MIN_FREE and record["e2e_instances"] == sizing.e2e_instances


def test_more_memory_never_means_fewer_instances():
    cost = InstanceCost(steady=int(3.5 * GIB), peak=int(7.4 * GIB))
    small, large = size(H100, 0, cost), size(H200, 0, cost)
    assert (small.raw_instances, small.e2e_instances) <= (large.raw_instances, large.e2e_instances)
    assert largest_server(large.raw_instances, large.e2e_instances, cost) <= (1 - MIN_FREE) * H200


def test_a_card_too_small_is_refused_with_the_numbers():
    with pytest.raises(ValueError, match=r"cannot hold the GPU reference build: one instance costs 3\.50 GiB"):
        size(16 * GIB, 0, InstanceCost(steady=int(3.5 * GIB), peak=int(7.4 * GIB)), "small card")
