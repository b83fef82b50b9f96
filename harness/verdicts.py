"""Two kinds of skip, told apart in the report: a check that does not concern this model ("not
applicable": an ensemble has no model file to read bindings from) and one that could not run on this host
("not tested": the server lacks the backend). The certification gate ignores the first and judges the
second against its profile."""

from __future__ import annotations

from typing import NoReturn

import pytest

NOT_APPLICABLE = "not applicable: "


def not_applicable(reason: str) -> NoReturn:
    pytest.skip(NOT_APPLICABLE + reason)
