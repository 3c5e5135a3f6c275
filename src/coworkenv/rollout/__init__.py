"""Rollouts: a sandbox per rollout, a harness inside it, records out."""
