"""Claw-Eval parity: its services run beside ours, its graders on our records, its metrics.

Modules: :mod:`~coworkenv.claweval.upstream` (Claw-Eval's mock services from a checkout),
:mod:`~coworkenv.claweval.differential` (the same requests to both),
:mod:`~coworkenv.claweval.identical` (the same request bytes to both, compared byte for byte),
:mod:`~coworkenv.claweval.trace` (our rollout record as a Claw-Eval trace),
:mod:`~coworkenv.claweval.grade` (each task's own ``grader.py``), :mod:`~coworkenv.claweval.worker`
(warm grader children that reward rollouts as they finish; :mod:`coworkenv.rollout.reward`),
:mod:`~coworkenv.claweval.metrics` (Claw-Eval's own metrics). Nothing here imports Claw-Eval: it
runs in a child process (:mod:`~coworkenv.claweval._child`) or as HTTP apps.
"""
