"""Driver scripts that run inside a harness's own venv (not importable here: they import the SDK).

Each is copied into the sandbox HOME (:func:`coworkenv.rollout.harnesses.pyvenv.driver`) and run by
the harness's interpreter; the SDK itself is unmodified.
"""
