"""The end-to-end model's pipeline as torch tensor code for a CUDA device: nvJPEG decode, letterbox,
the engine, confidence filter, class-aware greedy NMS and restore, batched, with no per-pixel or per-box
Python. Each step keeps the numbers of its numpy twin in harness.vision (the same letterbox geometry,
the same candidate order, the same greedy NMS in float64), and tests/test_gpu_pipeline.py holds them to
it on CPU; only the resampler and the JPEG decoder differ by a grey level here and there.

Imports torch, so only the GPU side of the served models (and the local GPU reference) loads it."""
