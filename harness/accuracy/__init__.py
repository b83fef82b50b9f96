"""Accuracy of a candidate (FP16/INT8 engine, served model) against the FP32 reference, in three levels:
tensors (Polygraphy-style error statistics), boxes (matched detections), mAP (COCO, ratio to FP32), each
also per slice; plus INT8 calibration coverage. Thresholds come from a profile (profiles/*.toml)."""
