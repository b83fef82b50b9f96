"""A vendor's repository is code (model.py runs at load time): what each launcher does about that,
stated where a user will read it."""

from __future__ import annotations

import warnings


class UntrustedCodeWarning(UserWarning):
    """The repository's model code runs with the harness user's rights on this host."""


HOST_EXECUTION = ("process launcher: the repository's model code (model.py) runs on this host with your "
                  "user's rights and network; use --triton=container for a repository you do not trust")


def warn_if_host_executes(server) -> str | None:
    """Warn (and return the text) when the server runs model code outside any container."""
    if getattr(server, "kind", None) != "process":
        return None
    warnings.warn(HOST_EXECUTION, UntrustedCodeWarning, stacklevel=2)
    return HOST_EXECUTION
