"""The verifiers plugin for coworkenv tasks: ``vf-eval coworkenv-verifiers ...``.

verifiers finds a taskset by a top-level module named after its id (``coworkenv-verifiers`` →
``coworkenv_verifiers``) exporting its Taskset, Env and Harness through ``__all__``; this package
is only that name. The environment itself is :mod:`coworkenv.integrations.verifiers_env`.
"""

from coworkenv.integrations.verifiers_env import (
    CoworkEnvConfig,
    CoworkEnvEnv,
    CoworkEnvHarness,
    CoworkEnvTask,
    CoworkEnvTaskset,
)

__all__ = ["CoworkEnvConfig", "CoworkEnvEnv", "CoworkEnvHarness", "CoworkEnvTask", "CoworkEnvTaskset"]
