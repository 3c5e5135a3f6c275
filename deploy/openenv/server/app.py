"""OpenEnv entry point: ``server.app:app`` (uvicorn) and ``main()`` (``uv run server``).

Serves the tasks named in ``$COWORKENV_TASKS`` (files, directories or built-in ids; default the
built-in library) as :class:`coworkenv.integrations.openenv.CoworkEnvironment`; the services run in
this process unless ``$COWORKENV_SERVICES_URL`` (and ``$COWORKENV_OPERATOR_TOKEN``) name a running
``coworkenv serve``.
"""

from __future__ import annotations

import contextlib
import os

from coworkenv.integrations.openenv import create_openenv_app
from coworkenv.integrations.session import Services
from coworkenv.rollout.cli import resolve_specs

_specs = resolve_specs(os.environ.get("COWORKENV_TASKS", "builtin").split())
_stack = contextlib.ExitStack()
if os.environ.get("COWORKENV_SERVICES_URL"):
    _services = Services.connect(
        os.environ["COWORKENV_SERVICES_URL"], os.environ["COWORKENV_OPERATOR_TOKEN"], _specs
    )
else:
    _services = _stack.enter_context(Services.local(_specs))
app = create_openenv_app(_services)


def main() -> None:
    import uvicorn

    uvicorn.run(app, host=os.environ.get("HOST", "0.0.0.0"), port=int(os.environ.get("PORT", "8000")))


if __name__ == "__main__":
    main()
