"""YOLO's convolution + bias + SiLU as one cuDNN kernel (cuDNN's runtime fusion through the cudnn-frontend
graph API): what TensorRT does to such a graph, with the cuDNN torch already loads. Without it a
convolution is cuDNN's kernel and then a second pass over the activation for the bias and the SiLU; on an
H200 the reference graph's 63 biased convolutions at batch 64 take 5.97 ms that way in eager torch and
3.42 ms fused (benchmarks/results/README.md, fusion stage).

The fused convolution is a torch custom op (`yts::conv_bias_act`), so a torch.compile'd shape plan traces
through it and inductor fuses the ops between convolutions. A cuDNN graph is built per input shape on
the first call (TorchEngine.capture runs each plan before recording, so no graph is built under CUDA graph
capture) and cached for the process."""

from __future__ import annotations

import threading

import torch

from harness.engines.base import EngineUnavailable


def _cudnn():
    try:
        import cudnn
    except ImportError as error:
        raise EngineUnavailable("conv_fusion 'cudnn' needs the cuDNN frontend: pip install nvidia-cudnn-frontend "
                                "(in the gpu extra)") from error
    return cudnn


class FusedConv:
    """conv_fprop -> bias -> swish (SiLU, when asked) as one cuDNN graph for one input shape and layout."""

    def __init__(self, x, w, bias, stride: list[int], padding: list[int], dilation: list[int], silu: bool):
        cudnn = _cudnn()
        self.cudnn = cudnn
        self.handle = _handle(cudnn, x.device)
        io = {torch.float16: cudnn.data_type.HALF, torch.float32: cudnn.data_type.FLOAT}[x.dtype]
        graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)
        self.X = graph.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=io)
        self.W = graph.tensor(name="W", dim=list(w.shape), stride=list(w.stride()), data_type=io)
        self.B = graph.tensor(name="B", dim=list(bias.shape), stride=list(bias.stride()), data_type=io)
        y = graph.conv_fprop(image=self.X, weight=self.W, padding=padding, stride=stride, dilation=dilation)
        y = graph.bias(name="bias", input=y, bias=self.B)
        if silu:
            y = graph.swish(input=y, swish_beta=1.0)
        y.set_output(True).set_data_type(io)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        self.graph, self.Y = graph, y
        self.workspace = torch.empty(max(1, graph.get_workspace_size()), device=x.device, dtype=torch.uint8)

    def __call__(self, x, w, bias, out):
        self.cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream(x.device).cuda_stream)
        self.graph.execute({self.X: x, self.W: w, self.B: bias, self.Y: out}, self.workspace, handle=self.handle)
        return out


_HANDLES: dict = {}
_GRAPHS: dict = {}
_LOCK = threading.Lock()


def _handle(cudnn, device):
    index = torch.device(device).index or 0
    if index not in _HANDLES:
        with torch.cuda.device(index):
            _HANDLES[index] = cudnn.create_handle()
    return _HANDLES[index]


def output_shape(x_shape, w_shape, stride, padding, dilation) -> list[int]:
    n, _, h, w = x_shape
    out = [n, w_shape[0]]
    for size, k, s, p, d in zip((h, w), w_shape[2:], stride, padding, dilation):
        out.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
    return out


def bias_4d(bias):
    """[K] -> [1, K, 1, 1] with NHWC strides, as cuDNN's bias operand wants it (a view, no copy)."""
    k = bias.shape[0]
    return bias.as_strided((1, k, 1, 1), (k, 1, k, k))


@torch.library.custom_op("yts::conv_bias_act", mutates_args=())
def conv_bias_act(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, stride: list[int], padding: list[int],
                  dilation: list[int], silu: bool) -> torch.Tensor:
    """SiLU(conv2d(x, w) + bias) (or without the SiLU), NHWC in and out, through one cuDNN graph."""
    x = x.contiguous(memory_format=torch.channels_last)
    w = w.contiguous(memory_format=torch.channels_last)
    bias = bias_4d(bias.contiguous())
    key = (tuple(x.shape), tuple(w.shape), tuple(w.stride()), x.dtype, x.device, tuple(stride), tuple(padding),
           tuple(dilation), silu)
    fused = _GRAPHS.get(key)
    if fused is None:
        with _LOCK:
            fused = _GRAPHS.get(key) or FusedConv(x, w, bias, stride, padding, dilation, silu)
            _GRAPHS[key] = fused
    out = torch.empty(output_shape(x.shape, w.shape, stride, padding, dilation), dtype=x.dtype, device=x.device,
                      memory_format=torch.channels_last)
    return fused(x, w, bias, out)


@conv_bias_act.register_fake
def _(x, w, bias, stride, padding, dilation, silu):
    return torch.empty(output_shape(x.shape, w.shape, stride, padding, dilation), dtype=x.dtype, device=x.device,
                       memory_format=torch.channels_last)


def check_available() -> None:
    """EngineUnavailable naming what is missing, before an engine commits to the fused path."""
    _cudnn()
