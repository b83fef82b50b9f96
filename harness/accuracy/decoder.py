"""Does a served end-to-end model's own JPEG decoder keep its accuracy? Its answers on the evaluation
set's JPEG files are scored against its answers on the same pixels losslessly encoded (PNG), so what
differs is the decoder alone — the precision gates run on the lossless input (AccuracySession).

JPEG leaves decoders freedom (IDCT precision, chroma upsampling), and a GPU decoder such as nvJPEG does
not return libjpeg-turbo's pixels; so the gate is MLPerf's deployment rule rather than exactness: mAP
on the JPEGs at least `[decoder] map_ratio_min` of mAP on the lossless input, overall. Slices and how far
boxes and scores moved are reported with the verdict, so a decoder that costs small objects is seen."""

from __future__ import annotations

from harness.accuracy import slices
from harness.accuracy.boxes import BoxReport
from harness.accuracy.evalset import EvalSet
from harness.accuracy.profile import Profile
from harness.accuracy.runner import Run

MATCH_IOU = 0.5
METRICS = ("mAP50_95", "mAP50")


def judge_decoding(lossless: Run, encoded: Run, evalset: EvalSet, profile: Profile) -> tuple[str, list[str]]:
    """(what the decoder changed, in one paragraph; the gate's failures)."""
    conf = max(profile.eval["map_conf"], lossless.conf, encoded.conf)
    options = dict(imgsz=profile.eval["imgsz"], small_max_area=profile.data["slices"]["small_max_area"],
                   large_min_area=profile.data["slices"]["large_min_area"])
    on_pixels = slices.evaluate(evalset.coco, lossless.coco(conf), **options)
    on_jpeg = slices.evaluate(evalset.coco, encoded.coco(conf), **options)
    boxes = BoxReport()
    for image_id, rows in lossless.at(conf).items():
        boxes.add(image_id, rows, encoded.at(conf)[image_id], MATCH_IOU)
    b = boxes.summary()
    ratios = {name: _ratio(on_jpeg[name]["mAP50_95"], m["mAP50_95"]) for name, m in on_pixels.items()}
    described = (
        f"on JPEG vs the same pixels as PNG ({b['images']} images): mAP50-95 {on_jpeg['all']['mAP50_95']:.4f} vs "
        f"{on_pixels['all']['mAP50_95']:.4f}; by slice " + ", ".join(f"{k} {v:.1%}" for k, v in ratios.items() if k != "all")
        + f"; boxes {b['matched']:.1%} matched at IoU {MATCH_IOU}, {b['extra']} extra of {b['reference_boxes']}, "
        f"class flips {b['class_flips']}, scores moved up to {b['score_delta_max']:.3f} (p99 {b['score_delta_p99']:.3f})")
    minimum = profile.data["decoder"]["map_ratio_min"]
    failures = [f"overall {metric} on JPEG {on_jpeg['all'][metric]:.4f} = {_ratio(on_jpeg['all'][metric], on_pixels['all'][metric]):.1%} "
                f"of its {on_pixels['all'][metric]:.4f} on the same pixels losslessly encoded (need >= {minimum:.0%}): "
                f"its JPEG decoding loses detections"
                for metric in METRICS
                if _ratio(on_jpeg["all"][metric], on_pixels["all"][metric]) < minimum]
    return described, failures


def _ratio(value: float, base: float) -> float:
    if base != base:  # NaN: no ground truth in the slice
        return float("nan")
    return value / base if base > 0 else 1.0
