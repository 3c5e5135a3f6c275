"""coworkenv's Harbor agents, as source written next to a Harbor run (they import ``harbor``, which
lives in Harbor's own venv, not in coworkenv's).

Contract: :func:`write_agents` writes the module :data:`MODULE` into a directory that
:func:`coworkenv.harbor.run.run_job` puts on Harbor's ``PYTHONPATH``; the agents are then named
``coworkenv_harbor_agents:<Class>``.

* :data:`SHELL_AGENT` (``ShellScriptAgent``) — uploads the host script ``$COWORKENV_HARBOR_AGENT_SCRIPT``
  (set in the environment of the ``harbor`` process) to ``/tmp/coworkenv-agent.sh`` in ``main``
  and runs it with bash in ``/app``; the instruction is in ``/tmp/coworkenv-instruction.md``. Its
  output goes to the trial's ``agent/script.txt``. The red-team tests and the teacher path
  (a harness CLI driven from a script) use it.
"""

from __future__ import annotations

from pathlib import Path

MODULE = "coworkenv_harbor_agents"
SCRIPT_ENV = "COWORKENV_HARBOR_AGENT_SCRIPT"
SHELL_AGENT = f"{MODULE}:ShellScriptAgent"

SOURCE = f'''"""coworkenv's Harbor agents (written by coworkenv.harbor.agents; do not edit)."""

import os
import tempfile
from pathlib import Path

from harbor.agents.base import BaseAgent


class ShellScriptAgent(BaseAgent):
    @staticmethod
    def name() -> str:
        return "coworkenv-shell-script"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment) -> None:
        return None

    async def run(self, instruction, environment, context) -> None:
        script = os.environ["{SCRIPT_ENV}"]
        with tempfile.TemporaryDirectory() as tmp:
            ins = Path(tmp) / "instruction.md"
            ins.write_text(instruction, encoding="utf-8")
            await environment.upload_file(ins, "/tmp/coworkenv-instruction.md")
        await environment.upload_file(script, "/tmp/coworkenv-agent.sh")
        res = await environment.exec("bash /tmp/coworkenv-agent.sh", cwd="/app")
        out = "exit %s\\n--- stdout\\n%s\\n--- stderr\\n%s\\n" % (
            res.return_code, res.stdout or "", res.stderr or "")
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "script.txt").write_text(out, encoding="utf-8")
'''


def write_agents(directory: Path) -> Path:
    """Write the agents' module into ``directory``; returns the file."""
    path = Path(directory) / f"{MODULE}.py"
    path.write_text(SOURCE, encoding="utf-8")
    return path


__all__ = ["MODULE", "SCRIPT_ENV", "SHELL_AGENT", "write_agents"]
