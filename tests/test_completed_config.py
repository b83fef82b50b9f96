"""harness.checks.model.completed_config: completed once per state of a model folder's files for the whole run
(collection asks for the same configs many times), read again as soon as config.pbtxt or a model file changes,
and every caller gets a copy of its own to change."""

from __future__ import annotations

from harness.checks import model as model_module
from harness.checks.model import completed_config
from harness.repository.config import parse_config, write_config


def test_completed_once_per_state_of_the_files_and_each_caller_owns_its_copy(tmp_path, monkeypatch):
    completions = []
    complete = model_module.complete
    monkeypatch.setattr(model_module, "complete", lambda *a, **k: completions.append(a[1]) or complete(*a, **k))
    folder = tmp_path / "detector"
    write_config(folder, parse_config('backend: "python" max_batch_size: 8 '
                                      'input { name: "x" data_type: TYPE_FP32 dims: [4] } '
                                      'output { name: "y" data_type: TYPE_FP32 dims: [4] }'))
    (folder / "1").mkdir()
    (folder / "1" / "model.py").write_text("")

    first = completed_config(folder)
    first.max_batch_size = 99  # a caller's change stays its own
    assert completed_config(folder).max_batch_size == 8 and len(completions) == 1

    config = completed_config(folder)
    config.max_batch_size = 4  # the same number of bytes: told apart by content, not by size and mtime
    write_config(folder, config)
    assert completed_config(folder).max_batch_size == 4 and len(completions) == 2

    (folder / "1" / "model.py").write_text("# a new version of the model file\n")
    assert completed_config(folder).max_batch_size == 4 and len(completions) == 3
