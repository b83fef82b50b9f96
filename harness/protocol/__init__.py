"""Protocol conformance machinery: wire-level request senders, the bad-input catalogue (as data),
parity comparison, model-role discovery and a tiny stand-in YOLO used by fixtures/protocol."""
