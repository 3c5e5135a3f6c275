"""Our environments inside the frameworks people already train and evaluate with.

One core, :mod:`coworkenv.integrations.session` (a trial over the HTTP face, graded at the end as a
``coworkenv rollout`` is), and one thin adapter per framework, each an optional extra:

* :mod:`~coworkenv.integrations.openenv` — an OpenEnv environment server and client
  (``coworkenv[openenv]``); :mod:`~coworkenv.integrations.trl` puts it under TRL's GRPOTrainer;
* :mod:`~coworkenv.integrations.inspect` — an Inspect AI task (``coworkenv[inspect]``);
* :mod:`~coworkenv.integrations.skyrl` — a SkyRL-gym text environment (``coworkenv[skyrl]``);
* :mod:`~coworkenv.integrations.verifiers_env` — a verifiers taskset and environment, the trial's
  MCP endpoint as the agent's tools (``coworkenv[verifiers]``; ``vf-eval coworkenv-verifiers``).

Every adapter pays the reward :meth:`TaskSession.finish` computes, so the same actions earn the
same reward in each (tested), and forbidden actions zero it in each.
"""
