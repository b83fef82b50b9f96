"""Model repositories: config.pbtxt through the ModelConfig protobuf, scratch copies, fingerprints."""
