"""One model directory of a repository as Triton sees it: its config as declared (or why it does not
parse) and as Triton completes it, its platform and backend, its default model filename and its
version directories."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.checks.autocomplete import Completion, complete
from harness.repository.config import CONFIG_NAME, ConfigError, ModelConfig, read_config

# Triton's platform -> backend pairing (model_config_utils: a platform implies its backend).
PLATFORM_BACKEND = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "ensemble": "",
}
# The file Triton looks for in a version directory when default_model_filename is not set.
PLATFORM_FILENAME = {
    "tensorrt_plan": "model.plan",
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
}
BACKEND_FILENAME = {
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "tensorflow": "model.savedmodel",
    "python": "model.py",
    "openvino": "model.xml",
    "dali": "model.dali",
}
# File endings that are model files for some backend: one found where Triton does not look is a
# model the server will never load.
MODEL_SUFFIXES = (".plan", ".engine", ".trt", ".onnx", ".pt", ".pth", ".torchscript", ".savedmodel",
                  ".graphdef", ".py", ".xml", ".dali")


@dataclass(frozen=True)
class ModelEntry:
    """`autocomplete` False judges the model as a server run with `--disable-auto-complete-config`."""

    repository: Path
    name: str
    autocomplete: bool = True

    @property
    def path(self) -> Path:
        return self.repository / self.name

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_NAME

    @cached_property
    def _parsed(self) -> tuple[ModelConfig | None, str | None]:
        if not self.config_path.is_file():
            return None, None
        try:
            return read_config(self.path), None
        except ConfigError as error:
            return None, str(error)
        except UnicodeDecodeError as error:
            return None, f"{self.config_path}: not text: {error}"

    @property
    def declared(self) -> ModelConfig | None:
        """config.pbtxt as written (None when absent or unparseable)."""
        return self._parsed[0]

    @cached_property
    def completion(self) -> Completion | None:
        """The config Triton would validate, completed from the model files (None when config.pbtxt
        exists but does not parse)."""
        if self.config_error is not None and self.config_path.is_file():
            return None
        return complete(self.declared, self.path, autocomplete=self.autocomplete)

    @property
    def config(self) -> ModelConfig | None:
        """The completed config: what the checks judge."""
        return self.completion.config if self.completion is not None else None

    @property
    def config_error(self) -> str | None:
        return self._parsed[1]

    @property
    def platform(self) -> str:
        return self.config.platform if self.config else ""

    @property
    def backend(self) -> str:
        """The backend Triton will use: the configured one, else the one the platform implies."""
        if self.config is None:
            return ""
        return self.config.backend or PLATFORM_BACKEND.get(self.config.platform, "")

    @property
    def is_ensemble(self) -> bool:
        return self.platform == "ensemble"

    @property
    def model_filename(self) -> str | None:
        """default_model_filename, else the platform's or backend's default; None for ensembles and
        backends that load no model file this suite knows of."""
        if self.config is None or self.is_ensemble or self.backend not in BACKEND_FILENAME:
            return None  # a custom backend (identity, ...) reads what it likes
        if self.config.default_model_filename:
            return self.config.default_model_filename
        return PLATFORM_FILENAME.get(self.config.platform) or BACKEND_FILENAME.get(self.backend)

    @property
    def version_dirs(self) -> list[Path]:
        """Numeric subdirectories, the only ones Triton treats as versions, in version order."""
        dirs = [p for p in self.path.iterdir() if p.is_dir() and p.name.isdigit()] if self.path.is_dir() else []
        return sorted(dirs, key=lambda p: int(p.name))

    def served_versions(self) -> list[int]:
        """The versions the version policy selects from the directories present (latest 1 by default)."""
        present = [int(p.name) for p in self.version_dirs]
        policy = self.config.version_policy if self.config else None
        if policy is not None and policy.HasField("all"):
            return present
        if policy is not None and policy.HasField("specific"):
            return sorted(v for v in set(policy.specific.versions) if v in present)
        count = policy.latest.num_versions if policy is not None and policy.HasField("latest") else 1
        return present[-count:] if count else []

    def model_files(self) -> list[Path]:
        """The model file of every served version that has one (what a server would load)."""
        if self.model_filename is None:
            return []
        files = [self.path / str(v) / self.model_filename for v in self.served_versions()]
        return [f for f in files if f.exists()]


def list_models(repository: Path) -> list[str]:
    """Every subdirectory is a model to Triton; hidden ones and caches are not models anyone meant."""
    repository = Path(repository)
    return sorted(p.name for p in repository.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__")


def load_entry(repository: Path, model: str, *, autocomplete: bool = True) -> ModelEntry:
    return ModelEntry(Path(repository), model, autocomplete)


def completed_config(model_dir: Path) -> ModelConfig:
    """The config Triton will load for the model in `model_dir`: config.pbtxt completed as Triton completes
    it (platform and backend from the model file, tensors from the ONNX graph or model.py's
    auto_complete_config). Every decision about a model reads this, never the bare file — host needs,
    the load list, roles, accuracy candidates, lifecycle and batching targets — so that a minimal config
    (an Ultralytics export's `metadata` parameter alone) is judged as the model Triton serves. A config
    that does not parse raises ConfigError; one Triton cannot complete is returned as far as it got (the
    config suite states Triton's refusal). Completed once per state of the folder's files (_stamp), for
    every caller of the run; each gets its own copy to change."""
    model_dir = Path(model_dir)
    key = (model_dir.resolve(), _stamp(model_dir)) if model_dir.is_dir() else None
    config = _COMPLETED.get(key) if key is not None else None
    if config is None:
        entry = load_entry(model_dir.parent, model_dir.name)
        if entry.config_error is not None:
            raise ConfigError(entry.config_error)
        config = entry.config
        if key is not None:
            _COMPLETED[key] = config
    copy = ModelConfig()
    copy.CopyFrom(config)
    return copy


_COMPLETED: dict[tuple, ModelConfig] = {}


def _stamp(model_dir: Path) -> tuple:
    """What a completion reads, as it stands now: config.pbtxt's bytes, and the name, size and mtime of each
    entry of the model folder and of its subfolders (the version folders and the model files in them)."""
    config = model_dir / CONFIG_NAME
    stamps = []
    for entry in sorted(model_dir.iterdir()):
        if entry.is_dir():
            stamps += [(f"{entry.name}/{f.name}", *_size_and_time(f)) for f in sorted(entry.iterdir())]
        stamps.append((entry.name, *_size_and_time(entry)))
    return (config.read_bytes() if config.is_file() else None, tuple(stamps))


def _size_and_time(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:  # a dangling link: the link itself
        info = path.lstat()
    return info.st_size, info.st_mtime_ns
