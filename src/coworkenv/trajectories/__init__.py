"""Trajectories: token-level prefix trees per rollout, filtering, and training samples."""
