"""How a host thread waits for its GPU work: CUDA's default spins a core while a synchronize or a
device-to-host copy waits (one context per process: fewer than cores), which in a Triton Python stub
burns the core the next batch's header parsing and per-request work need, and several stubs spinning
share hyper-threaded cores with the ones working. `blocking_sync` makes the process's primary context
yield instead (CU_CTX_SCHED_BLOCKING_SYNC), through the driver API, since torch exposes no setter.

Must run before the process first touches the device: a context already active keeps its flags on
drivers that refuse the change (the error says so)."""

from __future__ import annotations

import ctypes

CU_CTX_SCHED_BLOCKING_SYNC = 0x04
CU_CTX_SCHED_MASK = 0x07
SYNC_MODES = ("spin", "blocking")


def _driver():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        raise RuntimeError(f"CUDA driver library libcuda.so.1 not loadable: {error}") from error


def _check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed with CUresult {result}")


def blocking_sync(device_index: int) -> None:
    """Host waits on device `device_index` block on an OS primitive instead of spinning."""
    cuda = _driver()
    _check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    _check(cuda.cuDeviceGet(ctypes.byref(device), int(device_index)), f"cuDeviceGet({device_index})")
    setter = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
    _check(setter(device, CU_CTX_SCHED_BLOCKING_SYNC), "cuDevicePrimaryCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC)")
    flags, _ = primary_context_flags(device_index)
    if flags & CU_CTX_SCHED_MASK != CU_CTX_SCHED_BLOCKING_SYNC:
        raise RuntimeError(f"device {device_index}: primary context kept scheduling flags {flags & CU_CTX_SCHED_MASK:#x} "
                           "(the context was active before blocking_sync and this driver does not change it)")


def primary_context_flags(device_index: int) -> tuple[int, bool]:
    """(flags, active) of the device's primary context: what a test or a report reads back."""
    cuda = _driver()
    _check(cuda.cuInit(0), "cuInit")
    device, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    _check(cuda.cuDeviceGet(ctypes.byref(device), int(device_index)), f"cuDeviceGet({device_index})")
    _check(cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(active)), "cuDevicePrimaryCtxGetState")
    return flags.value, bool(active.value)
