"""The JPEG decoder's ceiling: P processes (as P model instances would) each decoding batches of the load
JPEG with torchvision's nvJPEG, as yolo_e2e does, together for --seconds: images/s in all and per process,
and every GPU engine's utilisation meanwhile from `nvidia-smi dmon` (sm = kernels, jpg = the NVJPG
hardware JPEG decoders nvJPEG's hardware backend runs on). No Triton, no engine, no letterbox.

Triton's nv_gpu_utilization (what the suites sample) is the SM column only: a wall in the JPEG engines
shows only here. Needs CUDA and torchvision.

    python -m benchmarks.probes.decoder_ceiling --out OUT.json [--processes 1,4,8] [--batch 64]"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import time

from benchmarks.probes.card import int_list, probe_arguments, write_record
from benchmarks.probes.reference import load_jpeg


class EngineSampler:
    """Each GPU engine's utilisation once a second from `nvidia-smi dmon -s u` while the block runs."""

    def __init__(self):
        self.process = None
        self.lines: list[str] = []

    def __enter__(self):
        try:
            self.process = subprocess.Popen(["nvidia-smi", "dmon", "-s", "u", "-d", "1"], stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.process = None
        return self

    def __exit__(self, *exc):
        if self.process is None:
            return
        self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        self.lines = out.splitlines()

    def summary(self, last_s: float) -> dict:
        """Mean and max per engine over the last `last_s` seconds' samples (start-up and warm-up left out)."""
        header = next((line.lstrip("#").split() for line in self.lines if line.startswith("# gpu")), None)
        rows = [line.split() for line in self.lines if line.strip() and not line.startswith("#")][-max(1, int(last_s)):]
        out: dict = {"samples": len(rows) if header else 0}
        for index, name in enumerate((header or [])[1:], start=1):
            values = [float(r[index]) for r in rows if len(r) > index and r[index].replace(".", "", 1).isdigit()]
            if values:
                out[f"{name}_pct_mean"], out[f"{name}_pct_max"] = round(sum(values) / len(values), 1), max(values)
        return out


def _decode(blob: bytes, batch: int, seconds: float, barrier, results) -> None:
    """One process: decode batches of `blob` on cuda:0 after the others are ready, count the images."""
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(blob), dtype=torch.uint8) for _ in range(batch)]
    for _ in range(3):
        decode_jpeg(data, mode=ImageReadMode.RGB, device="cuda:0")
    torch.cuda.synchronize()
    barrier.wait()
    images, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        decode_jpeg(data, mode=ImageReadMode.RGB, device="cuda:0")
        images += batch
    torch.cuda.synchronize()
    results.put((images, time.perf_counter() - started))


def measure(processes: list[int], batch: int, seconds: float) -> dict:
    blob, payload = load_jpeg()
    spawn = multiprocessing.get_context("spawn")
    out: dict = {"payload": payload, "batch": batch, "seconds": seconds, "processes": {}}
    for count in processes:
        barrier, results = spawn.Barrier(count), spawn.Queue()
        workers = [spawn.Process(target=_decode, args=(blob, batch, seconds, barrier, results)) for _ in range(count)]
        try:
            with EngineSampler() as engines:
                for worker in workers:
                    worker.start()
                done = [results.get(timeout=120 + seconds) for _ in workers]
        finally:  # a worker that died leaves the others at the barrier: none outlives the probe
            for worker in workers:
                worker.join(timeout=5)
                if worker.is_alive():
                    worker.kill()
        out["processes"][str(count)] = {"images_per_s": round(sum(n / t for n, t in done), 1),
                                        "per_process_images_per_s": sorted(round(n / t, 1) for n, t in done),
                                        "engines": engines.summary(last_s=seconds)}
        print(f"  {count} processes: {out['processes'][str(count)]}", flush=True)
    return out



def parse_args(argv=None) -> argparse.Namespace:
    parser = probe_arguments(__doc__)
    parser.add_argument("--processes", type=int_list, default=[1, 4, 8], help="processes decoding together, one run each")
    parser.add_argument("--batch", type=int, default=64, help="images a decode call")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds a run")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    write_record(args.out, "decoder_ceiling", args, measure(args.processes, args.batch, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
