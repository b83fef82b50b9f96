"""A request refused by the model's queue policy is not a deployment that stopped serving. Triton's dynamic
batcher rejects a request that waited in its queue longer than the policy's timeout (ModelQueuePolicy:
timeout_action REJECT, default_timeout_microseconds; per priority level in priority_queue_policy) with
UNAVAILABLE -- HTTP 503 / gRPC UNAVAILABLE "Request timeout expired" (Triton 2.51, measured on
fixtures/protocol/queue_timeout). A check that gets one says so, naming the policy and its timeout as the
served config states them, and why a request waited that long where the config shows it (a batcher delay
at least as long as the timeout holds every request that does not fill a batch until it expires)."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2

from harness.protocol.wire import Answer

TIMEOUT_EXPIRED = "request timeout expired"
UNAVAILABLE = {"http": "503", "grpc": "UNAVAILABLE"}
Policy = model_config_pb2.ModelQueuePolicy


def queue_rejection(answer: Answer, model: str, config: model_config_pb2.ModelConfig | None) -> str | None:
    """None unless `answer` is the batcher's timeout rejection; else what refused it, from the served `config`."""
    if answer.ok or answer.status != UNAVAILABLE.get(answer.protocol) or TIMEOUT_EXPIRED not in answer.message.lower():
        return None
    head = (f"{answer.protocol} {answer.status} {answer.message!r} is {model}'s queue policy refusing a request that "
            f"waited in the queue past its timeout, not a deployment that stopped serving")
    if config is None or not config.HasField("dynamic_batching"):
        return f"{head} (the served config of {model} could not be read or has no dynamic_batching to name it)"
    batching = config.dynamic_batching
    policies = [("dynamic_batching.default_queue_policy", batching.default_queue_policy)] + [
        (f"dynamic_batching.priority_queue_policy[{level}]", policy)
        for level, policy in sorted(batching.priority_queue_policy.items())]
    rejecting = [(where, policy) for where, policy in policies
                 if policy.timeout_action == Policy.REJECT and policy.default_timeout_microseconds]
    if not rejecting:
        return (f"{head}: no queue policy of the served config rejects on a timeout of its own; a request's "
                f"timeout parameter did (allow_timeout_override)")
    named = "; ".join(f"{where} {{ timeout_action: REJECT default_timeout_microseconds: "
                      f"{policy.default_timeout_microseconds} }} rejects after {_ms(policy.default_timeout_microseconds)}"
                      for where, policy in rejecting)
    shortest = min(policy.default_timeout_microseconds for _, policy in rejecting)
    delay = batching.max_queue_delay_microseconds
    if delay >= shortest:
        why = (f"max_queue_delay_microseconds: {delay} ({_ms(delay)}) holds a request that does not fill a batch"
               f"{' of ' + str(max(batching.preferred_batch_size)) if batching.preferred_batch_size else ''} at "
               f"least as long, so such a request is refused before it runs")
    else:
        why = (f"the batcher delays a request at most {_ms(delay)} (max_queue_delay_microseconds): it waited for a "
               f"busy instance longer than the timeout")
    return f"{head}: {named}; {why}"


def _ms(microseconds: int) -> str:
    return f"{microseconds / 1000:g} ms"
