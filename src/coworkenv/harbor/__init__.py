"""Running packaged tasks under Harbor (the PyPI ``harbor`` CLI, in its own venv) with Docker.

* :mod:`~coworkenv.harbor.images` — the offline images every exported task builds FROM;
* :mod:`~coworkenv.harbor.run` — ``harbor run`` on exported tasks, results read back per trial.

``scripts/install_harbor.sh`` installs Docker, ``docker compose``, the base image and Harbor.
"""

from __future__ import annotations

from coworkenv.errors import CoworkError


class HarborError(CoworkError):
    """Harbor or Docker could not do a step; the message names the task (if any) and the step."""


__all__ = ["HarborError"]
