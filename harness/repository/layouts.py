"""A model's layout: what its image input takes and what its outputs give, read from ALL of its config's
inputs and outputs (or declared by the owner, harness.repository.manifest `[layout.NAME]`), and the role
that follows. One reading for every suite: the config suite's role check, the accuracy suite's served
candidates, the served letterbox checks and the protocol suite all ask this module.

Inputs (the one input that takes images; any other input must be optional or declared in yts.toml
`[inputs.NAME]`, harness.repository.extra_inputs, which says what each request puts there):
- `tensor`   FP32/FP16 [3, H, W] letterboxed and scaled by the client (ultralytics' `images`);
- `encoded`  TYPE_STRING encoded image bytes (JPEG/PNG), or UINT8 [-1] holding a file's bytes;
- `base64`   TYPE_STRING base64 text of the encoded bytes (told by a name with base64/b64 in it, or declared);
- `pixels`   UINT8 [H, W, 3] decoded pixels (HWC, NHWC when batched), letterboxed on the server.

Outputs (matched by shapes and data types, names only to break ties):
- `raw`   [4 + nc, anchors] (YOLOv8's head before NMS);
- `rows`  [max_det, 6] x1, y1, x2, y2, score, class (+ an optional integer count): the reference's
          `detections` + `num_detections`, Ultralytics' `nms=True` export [N, 300, 6];
- `nms`   NMS-inside outputs as EfficientNMS writes them: a count [1], boxes [K, 4], scores [K] and
          classes [K] (`num_dets`/`det_boxes`/`det_scores`/`det_classes`, or any other names);
- `json`  a TYPE_STRING output of JSON detections: decodable once its name and box format are declared.
Without a count output, rows and NMS outputs are read as padded: a row with a score <= 0 or a class < 0
(EfficientNMS and Ultralytics pad with zeros, the reference with -1) is empty; nothing assumes a count.

Segmentation heads (YOLOv8-seg): a second output of prototypes [M, H, W] (batched or written [1, M, H, W])
whose M is the number of columns beyond the detections: rows [max_det, 6 + M] (`output0 [300, 38]` with
`output1 [32, 160, 160]`) or raw [4 + nc + M, anchors]. Their detections are judged from the first 6
columns (the first 4 + nc rows); the masks are not tested, and every check that reads the layout says so.

Boxes are xyxy in pixels unless declared otherwise (`box_format` xywh = top-left x, y, w, h; cxcywh;
`box_units` normalized = fractions of the image the model saw). The pixels are those of the image the
model saw: the letterboxed canvas for a `tensor` input (the client restores them), the source image
for every other input.

Roles: `raw` = a tensor input and a raw output (the harness does pre- and post-processing);
`e2e` = any image input and any detections output (rows, nms, json). Anything else has no role, and
`Layout.what_to_declare()` says exactly what the owner should write in yts.toml."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

TENSOR, ENCODED, BASE64, PIXELS = "tensor", "encoded", "base64", "pixels"
INPUT_KINDS = (TENSOR, ENCODED, BASE64, PIXELS)
RAW, ROWS, NMS, JSON = "raw", "rows", "nms", "json"
DETECTIONS = (ROWS, NMS, JSON)
BOX_FORMATS = ("xyxy", "xywh", "cxcywh")
BOX_UNITS = ("pixels", "normalized")
ROLE_RAW, ROLE_E2E = "raw", "e2e"

FLOATS = ("FP32", "FP16", "FP64", "BF16")
INTEGERS = ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")
BASE64_NAME = re.compile(r"base64|b64", re.IGNORECASE)
CLASS_NAME = re.compile(r"class|label|cls|categor", re.IGNORECASE)
SCORE_NAME = re.compile(r"score|conf|prob", re.IGNORECASE)
# TensorRT's YOLO_NMS_TRT plugin adds det_indices [K] beside EfficientNMS's four: the kept anchors' indices, no detections
INDEX_NAME = re.compile(r"ind(ex|ices)", re.IGNORECASE)
COUNT_NAME = re.compile(r"num|count|dets", re.IGNORECASE)

# What a [layout.NAME] table may say: key -> what it is.
DECLARATION_KEYS = {
    "input": f"the image input's kind: one of {list(INPUT_KINDS)}",
    "raw": "the raw [4 + nc, anchors] output's name",
    "rows": "the [max_det, 6] x1, y1, x2, y2, score, class output's name",
    "boxes": "the NMS boxes [K, 4] output's name", "scores": "the NMS scores [K] output's name",
    "classes": "the NMS classes [K] output's name", "count": "the integer count output's name (optional)",
    "json": "the TYPE_STRING JSON detections output's name",
    "box_format": f"one of {list(BOX_FORMATS)} (default xyxy)",
    "box_units": f"one of {list(BOX_UNITS)} (default pixels)",
}


@dataclass(frozen=True)
class Port:
    """One config input or output, its dims without the batch dim, its data type as the wire names it."""

    name: str
    datatype: str  # FP32, BYTES, UINT8, INT32, ...
    dims: tuple[int, ...]
    optional: bool = False

    def describe(self) -> str:
        return f"{self.name!r} {self.datatype} {list(self.dims)}"


@dataclass(frozen=True)
class LayoutDeclaration:
    """The owner's `[layout.NAME]` table: any subset of DECLARATION_KEYS; what it leaves out is read."""

    input: str | None = None
    raw: str | None = None
    rows: str | None = None
    boxes: str | None = None
    scores: str | None = None
    classes: str | None = None
    count: str | None = None
    json: str | None = None
    box_format: str | None = None
    box_units: str | None = None
    source: str = ""
    inputs: tuple = ()  # ExtraInput entries of [inputs.NAME] (harness.repository.extra_inputs): filled per request

    @property
    def outputs(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in ("raw", "rows", "boxes", "scores", "classes", "count", "json") if getattr(self, k)}


def parse_declaration(name: str, table, origin: str) -> LayoutDeclaration:
    """A `[layout.NAME]` table -> LayoutDeclaration; ValueError says which key and why."""
    where = f"{origin}: [layout.{name}]"
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table of {sorted(DECLARATION_KEYS)}")
    unknown = sorted(set(table) - set(DECLARATION_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; a layout says " +
                         "; ".join(f"{k} = {v}" for k, v in DECLARATION_KEYS.items()))
    for key, value in table.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where}: {key} = {value!r} must be a non-empty string ({DECLARATION_KEYS[key]})")
    units = {"normalised": "normalized"}.get(table.get("box_units"), table.get("box_units"))
    for key, allowed, value in (("input", INPUT_KINDS, table.get("input")), ("box_format", BOX_FORMATS, table.get("box_format")),
                                ("box_units", BOX_UNITS, units)):
        if value is not None and value not in allowed:
            raise ValueError(f"{where}: {key} = {value!r}: one of {list(allowed)}")
    declared = LayoutDeclaration(**{**table, "box_units": units}, source=origin)
    kinds = [k for k in ("raw", "rows", "json") if getattr(declared, k)] + (["nms"] if declared.boxes else [])
    if len(kinds) > 1:
        raise ValueError(f"{where}: declares {kinds} outputs at once; one of raw, rows, boxes (+ scores, classes), json")
    if declared.boxes and not (declared.scores and declared.classes):
        raise ValueError(f"{where}: boxes = {declared.boxes!r} needs scores and classes too (the NMS outputs)")
    if (declared.scores or declared.classes) and not declared.boxes:
        raise ValueError(f"{where}: scores/classes need boxes = \"...\" (the NMS boxes [K, 4] output)")
    return declared


@dataclass(frozen=True)
class InputLayout:
    kind: str  # one of INPUT_KINDS
    port: Port
    how: str = ""  # what told it, when not the data type and shape alone

    @property
    def name(self) -> str:
        return self.port.name

    @property
    def imgsz(self) -> tuple[int, int] | None:
        """(h, w) of a tensor input's canvas, when its dims fix it."""
        if self.kind == TENSOR and len(self.port.dims) >= 2 and min(self.port.dims[-2:]) > 0:
            return int(self.port.dims[-2]), int(self.port.dims[-1])
        return None

    def describe(self) -> str:
        what = {TENSOR: "letterboxed tensors (the client letterboxes)", ENCODED: "encoded images",
                BASE64: "base64-encoded images", PIXELS: "decoded HWC pixels (the server letterboxes)"}[self.kind]
        return f"input {self.port.describe()}: {what}" + (f" ({self.how})" if self.how else "")


@dataclass(frozen=True)
class OutputLayout:
    kind: str  # one of RAW, ROWS, NMS, JSON
    names: dict[str, str]  # part -> output name: raw | rows (+count) | boxes, scores, classes (+count) | json
    box_format: str = "xyxy"
    box_units: str = "pixels"
    max_det: int | None = None
    ports: tuple[Port, ...] = ()
    how: str = ""
    masks: int = 0  # mask coefficients after the detection columns/rows: a segmentation head (names["prototypes"])

    @property
    def count(self) -> str | None:
        return self.names.get("count")

    @property
    def read(self) -> list[str]:
        """The outputs the detections are read from, to request: not a segmentation head's prototypes (masks
        are not tested, and [32, 160, 160] floats an image would only be carried)."""
        return list(dict.fromkeys(n for part, n in self.names.items() if part != "prototypes"))

    @property
    def primary(self) -> str:
        """The output that holds the boxes (raw tensor, rows, NMS boxes or JSON text)."""
        return self.names.get(self.kind if self.kind != NMS else "boxes")

    def describe(self) -> str:
        ports = ", ".join(p.describe() for p in self.ports) or ", ".join(self.names.values())
        what = {RAW: "raw [4 + nc, anchors]", ROWS: "detection rows [max_det, 6]", NMS: "NMS-inside outputs (boxes, scores, classes)",
                JSON: "JSON detections"}[self.kind]
        if self.masks:
            what = {RAW: f"raw [4 + nc + {self.masks}, anchors]", ROWS: f"detection rows [max_det, 6 + {self.masks}]"}[self.kind]
        elif self.kind in (ROWS, NMS) and self.count is None:
            what += ", no count (rows with score <= 0 or class < 0 are padding)"
        boxes = "" if self.kind == RAW else f", boxes {self.box_format} in {self.box_units}"
        return f"output {ports}: {what}{boxes}" + (f" ({self.how})" if self.how else "") + \
            (f"; {self.untested}" if self.masks else "")

    @property
    def untested(self) -> str | None:
        """What of the output no check judges: a segmentation head's masks."""
        if not self.masks:
            return None
        part = "the first 6 columns" if self.kind == ROWS else "the first 4 + nc rows"
        return (f"segmentation head: detections judged from {part}; masks not tested ({self.masks} mask coefficients "
                f"with prototypes {self.names['prototypes']!r})")


@dataclass(frozen=True)
class Layout:
    model: str
    input: InputLayout | None
    output: OutputLayout | None
    batched: bool
    unread: tuple[str, ...] = ()  # why the input or the outputs could not be read
    declared: LayoutDeclaration | None = None
    inputs: tuple[Port, ...] = field(default=(), repr=False)
    outputs: tuple[Port, ...] = field(default=(), repr=False)
    unfilled: tuple[Port, ...] = ()  # inputs beside the image that nothing fills: [inputs.NAME] would

    @property
    def extras(self) -> tuple:
        """The declared [inputs.NAME] entries (harness.repository.extra_inputs) every image request carries."""
        return self.declared.inputs if self.declared is not None else ()

    def extra_values(self, source_hw: tuple[int, int], imgsz) -> dict:
        """input name -> the value of each declared extra input for one image (no batch dim)."""
        from harness.repository.extra_inputs import values

        return values(self.extras, self.inputs, source_hw, imgsz) if self.extras else {}

    @property
    def role(self) -> str | None:
        if self.input is None or self.output is None:
            return None
        if self.output.kind == RAW:
            return ROLE_RAW if self.input.kind == TENSOR else None
        return ROLE_E2E

    @property
    def frame(self) -> str:
        """Where the boxes' pixels are: the letterboxed canvas ("input") or the source image."""
        return "input" if self.input is not None and self.input.kind == TENSOR else "source"

    def describe(self) -> str:
        parts = [self.input.describe() if self.input else "no image input read",
                 self.output.describe() if self.output else "no detections output read"]
        return "; ".join(parts)

    def why_no_role(self) -> str:
        """What was read and what was not, for a model with no role."""
        if self.input is not None and self.output is not None:  # raw output behind an image the server decodes
            return (f"{self.input.describe()} with {self.output.describe()}: the harness cannot post-process raw "
                    "outputs of an image it did not letterbox")
        return "; ".join(self.unread) or self.describe()

    def what_to_declare(self) -> str:
        """The yts.toml lines that would place this model: [layout.NAME] for what could not be read, and
        [inputs.NAME] for the inputs beside its image that nothing fills (harness.repository.extra_inputs)."""
        from harness.repository.extra_inputs import what_to_declare

        lines = [f"[layout.{self.model}]"]
        if self.input is None and not self.unfilled:
            lines.append(f'input = "{"|".join(INPUT_KINDS)}"')
        if self.output is None or self.output.kind == RAW:
            strings = [p.name for p in self.outputs if p.datatype == "BYTES"]
            if strings:
                lines.append(f'json = "{strings[0]}"')
            else:
                lines.append('rows = "NAME"  # or boxes = "NAME", scores = "NAME", classes = "NAME", count = "NAME"')
            lines.append(f'box_format = "{"|".join(BOX_FORMATS)}"')
            lines.append(f'box_units = "{"|".join(BOX_UNITS)}"')
        parts = ([what_to_declare(self.model, self.unfilled)] if self.unfilled else []) + \
            (["; ".join(lines)] if len(lines) > 1 else [])
        return "; ".join(parts)

    def contradicts(self, role: str) -> str | None:
        """Why the config cannot be a model of the declared `role`, or None."""
        if not self.inputs or not self.outputs:
            return "it declares no inputs or no outputs"
        if role == ROLE_RAW:
            tensor = self.input if self.input is not None and self.input.kind == TENSOR else None
            if tensor is None:
                first = self.inputs[0]
                loose = first.datatype in ("FP32", "FP16") and len(first.dims) >= 3 and first.dims[-3] in (3, -1)
                if not loose:
                    return f"input {first.describe()} is not FP32 [3, H, W]"
            if self.output is not None and self.output.kind != RAW:
                return f"its {self.output.describe()}, not [4 + nc, anchors]"
            if len(self.outputs[0].dims) < 2:
                return f"output {self.outputs[0].describe()} is not [4 + nc, anchors]"
        if role == ROLE_E2E:
            if self.input is None:
                return f"no input takes images ({'; '.join(self.unread) or [p.describe() for p in self.inputs]})"
            if self.output is None:
                return "no output gives detections: " + ("; ".join(self.unread) or str([p.describe() for p in self.outputs]))
            if self.output.kind == RAW:
                return (f"its {self.output.describe()}, not detections (rows [max_det, 6], NMS outputs, or "
                        "outputs declared in [layout.NAME])")
        return None


# -- reading ---------------------------------------------------------------------------------------
def _wire(data_type: int) -> str:
    from tritonclient.grpc import model_config_pb2 as pb  # noqa: PLC0415

    name = pb.DataType.Name(data_type).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def ports(items) -> tuple[Port, ...]:
    return tuple(Port(p.name, _wire(p.data_type), tuple(int(d) for d in p.dims), bool(getattr(p, "optional", False)))
                 for p in items)


def _unbatched(dims: tuple[int, ...], batched: bool, rank: int) -> tuple[int, ...]:
    """Without max_batch_size the batch dim is written into the dims: [1, 3, H, W] reads as [3, H, W]."""
    if not batched and len(dims) == rank + 1 and dims[0] in (1, -1):
        return dims[1:]
    return dims


def _image_kind(port: Port, batched: bool) -> tuple[str | None, str, tuple[int, ...]]:
    """(kind, how, dims) of one input read as an image input, kind None when it is not one."""
    if port.datatype == "BYTES":
        if BASE64_NAME.search(port.name):
            return BASE64, "its name says base64", port.dims
        return ENCODED, "", port.dims
    if port.datatype == "UINT8":
        flat = _unbatched(port.dims, batched, 1)
        if len(flat) == 1:
            return ENCODED, "UINT8 [-1]: a file's bytes", flat
        hwc = _unbatched(port.dims, batched, 3)
        if len(hwc) == 3 and hwc[-1] in (3, -1) and hwc[0] != 3:
            return PIXELS, "UINT8 [-1, -1, -1] read as HWC, the decoded-image layout" if hwc[-1] == -1 else "", hwc
        return None, "", port.dims
    if port.datatype in ("FP32", "FP16"):
        chw = _unbatched(port.dims, batched, 3)
        if len(chw) == 3 and chw[0] == 3:
            return TENSOR, "", chw
    return None, "", port.dims


def _read_input(inputs: tuple[Port, ...], batched: bool, declared: LayoutDeclaration | None):
    filled = {e.name for e in declared.inputs} if declared is not None else set()
    inputs = tuple(p for p in inputs if p.name not in filled)  # declared [inputs.NAME] entries: never the image
    found = []
    for port in inputs:
        kind, how, dims = _image_kind(port, batched)
        if kind is not None:
            found.append((kind, how, Port(port.name, port.datatype, dims, port.optional)))
    if declared is not None and declared.input:
        fitting = {TENSOR: ("FP32", "FP16"), ENCODED: ("BYTES", "UINT8"), BASE64: ("BYTES",), PIXELS: ("UINT8",)}[declared.input]
        candidates = [p for p in inputs if p.datatype in fitting]
        if len(candidates) != 1:
            return None, (f"input = {declared.input!r} is declared ({declared.source}), but "
                          f"{len(candidates)} inputs are {'/'.join(fitting)}: {[p.describe() for p in inputs]}"), ()
        port = candidates[0]
        known = next((f for f in found if f[2].name == port.name), None)
        dims = known[2].dims if known else port.dims
        found = [(declared.input, f"declared in {declared.source}", Port(port.name, port.datatype, dims, port.optional))]
    if not found:
        return None, f"no input takes images: {[p.describe() for p in inputs]} (an image input is FP32/FP16 [3, H, W], " \
                     "TYPE_STRING encoded or base64 images, UINT8 [H, W, 3] pixels or UINT8 [-1] file bytes)", ()
    if len(found) > 1:
        return None, f"several inputs could take the image: {[f[2].describe() for f in found]}", ()
    kind, how, port = found[0]
    others = [p for p in inputs if p.name != port.name and not p.optional]
    if others:
        return None, (f"input {port.describe()} takes images, but the model also needs {[p.describe() for p in others]}, "
                      "which the suites cannot infer unless yts.toml says what they carry ([inputs.NAME])"), tuple(others)
    return InputLayout(kind, port, how), None, ()


def _same(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _count_output(outputs: tuple[Port, ...], taken: set[str]) -> Port | None:
    """The detections' count: a [1] output, integer or named as a count (a float [1] named otherwise, a
    timing or a scale, is not one: without a count the rows are read as padded)."""
    counts = [p for p in outputs if p.name not in taken and all(d in (1, -1) for d in p.dims) and len(p.dims) <= 2
              and (p.datatype in INTEGERS or (p.datatype in FLOATS and COUNT_NAME.search(p.name)))]
    counts.sort(key=lambda p: (p.datatype not in INTEGERS, not COUNT_NAME.search(p.name)))
    return counts[0] if counts else None


def _read_nms(outputs: tuple[Port, ...]) -> tuple[OutputLayout | None, str | None]:
    boxes = [p for p in outputs if p.datatype in FLOATS and len(p.dims) >= 2 and p.dims[-1] == 4]
    for box in boxes:
        lead = box.dims[:-1]
        scalar = all(d == 1 for d in lead)  # a count [1] fits a lead of -1: not a peer unless K is 1
        peers = [p for p in outputs if p is not box and _same(p.dims, lead) and p.datatype in FLOATS + INTEGERS
                 and (scalar or not all(d == 1 for d in p.dims))]
        if len(peers) == 3:
            peers = [p for p in peers if not (p.datatype in INTEGERS and INDEX_NAME.search(p.name))]
        if len(peers) != 2:
            continue
        ints = [p for p in peers if p.datatype in INTEGERS]
        if len(ints) == 1:
            classes, scores = ints[0], next(p for p in peers if p is not ints[0])
        else:
            by_name = [p for p in peers if CLASS_NAME.search(p.name) and not SCORE_NAME.search(p.name)]
            if len(by_name) != 1:
                return None, (f"outputs {box.describe()}, {peers[0].describe()}, {peers[1].describe()} look like NMS boxes, "
                              "scores and classes, but which is the scores and which the classes cannot be told")
            classes, scores = by_name[0], next(p for p in peers if p is not by_name[0])
        count = _count_output(outputs, {box.name, scores.name, classes.name})
        names = {"boxes": box.name, "scores": scores.name, "classes": classes.name}
        if count is not None:
            names["count"] = count.name
        k = box.dims[-2]
        return OutputLayout(NMS, names, max_det=k if k > 0 else None,
                            ports=tuple(p for p in (count, box, scores, classes) if p is not None)), None
    return None, None


def _prototypes(outputs: tuple[Port, ...], batched: bool) -> list[tuple[Port, int]]:
    """(port, M) of every output that could hold segmentation prototypes [M, H, W]: M fixed, H and W a map
    (not 1), as YOLOv8-seg's `output1` [32, 160, 160]."""
    found = []
    for port in outputs:
        dims = _unbatched(port.dims, batched, 3)
        if port.datatype in FLOATS and len(dims) == 3 and dims[0] > 0 and all(d != 1 for d in dims[1:]):
            found.append((port, int(dims[0])))
    return found


def _read_rows(outputs: tuple[Port, ...], batched: bool) -> OutputLayout | None:
    widths = {6: None, **{6 + m: port for port, m in _prototypes(outputs, batched)}}
    rows = [p for p in outputs if p.datatype in FLOATS and len(p.dims) >= 2 and p.dims[-1] in widths
            and p.dims[-2] != p.dims[-1] and widths[p.dims[-1]] is not p]
    if not rows:
        return None
    chosen = next((p for p in rows if p.name == "detections"), rows[0])
    prototypes = widths[chosen.dims[-1]]
    count = _count_output(outputs, {chosen.name})
    names = {"rows": chosen.name, **({"count": count.name} if count is not None else {}),
             **({"prototypes": prototypes.name} if prototypes is not None else {})}
    k = chosen.dims[-2]
    return OutputLayout(ROWS, names, max_det=k if k > 0 else None, masks=chosen.dims[-1] - 6,
                        ports=tuple(p for p in (chosen, count, prototypes) if p is not None))


def _read_raw(outputs: tuple[Port, ...], batched: bool) -> OutputLayout | None:
    for port in outputs:
        dims = _unbatched(port.dims, batched, 2)
        if port.datatype in FLOATS and len(dims) == 2 and dims[-1] != 6 and (dims[0] == -1 or dims[0] > 4):
            segment = next(((p, m) for p, m in _prototypes(outputs, batched) if p is not port and dims[0] > 4 + m), None)
            if segment is not None:
                return OutputLayout(RAW, {"raw": port.name, "prototypes": segment[0].name}, ports=(port, segment[0]),
                                    masks=segment[1])
            return OutputLayout(RAW, {"raw": port.name}, ports=(port,))
        break  # the raw output is the first one (what ServedRawModel and the reference's yolo_raw return first)
    return None


def _declared_output(outputs: tuple[Port, ...], declared: LayoutDeclaration) -> tuple[OutputLayout | None, str | None]:
    names = declared.outputs
    by_name = {p.name: p for p in outputs}
    missing = sorted(n for n in names.values() if n not in by_name)
    if missing:
        return None, (f"[layout] in {declared.source} names outputs {missing} that the config does not have "
                      f"(it has {sorted(by_name)})")
    kind = RAW if declared.raw else ROWS if declared.rows else JSON if declared.json else NMS if declared.boxes else None
    if kind is None:
        return None, None
    primary = by_name[names["boxes" if kind == NMS else kind]]
    k = primary.dims[-2] if kind in (ROWS, NMS) and len(primary.dims) >= 2 and primary.dims[-2] > 0 else None
    return OutputLayout(kind, names, declared.box_format or "xyxy", declared.box_units or "pixels", k,
                        tuple(by_name[n] for n in names.values()), f"declared in {declared.source}"), None


def _read_output(outputs: tuple[Port, ...], batched: bool, declared: LayoutDeclaration | None):
    if declared is not None and declared.outputs:
        found, problem = _declared_output(outputs, declared)
        if found is not None or problem is not None:
            return found, problem
    nms, problem = _read_nms(outputs)
    found = nms or (None if problem else _read_rows(outputs, batched))
    if found is None and problem is None:
        strings = [p for p in outputs if p.datatype == "BYTES"]
        if strings:
            problem = (f"output {strings[0].describe()} is text (JSON detections?): its box format cannot be read from "
                       "the config")
        else:
            found = _read_raw(outputs, batched)
    if found is None:
        return None, problem or f"no output gives detections or raw [4 + nc, anchors]: {[p.describe() for p in outputs]}"
    if declared is not None and (declared.box_format or declared.box_units):
        found = replace(found, box_format=declared.box_format or found.box_format,
                        box_units=declared.box_units or found.box_units, how=f"box format declared in {declared.source}")
    return found, None


def read_layout(config, declared: LayoutDeclaration | None = None, name: str | None = None) -> Layout:
    """The layout of a ModelConfig, what the owner declared filling in what the config cannot say."""
    batched = config.max_batch_size > 0
    inputs, outputs = ports(config.input), ports(config.output)
    image, input_problem, unfilled = _read_input(inputs, batched, declared) if inputs else \
        (None, "it declares no inputs", ())
    result, output_problem = _read_output(outputs, batched, declared) if outputs else (None, "it declares no outputs")
    return Layout(name or config.name, image, result, batched,
                  tuple(p for p in (input_problem, output_problem) if p), declared, inputs, outputs, unfilled)
