"""coworkenv: executable work environments for AI coworker agents, and training agents through them."""

__version__ = "0.1.0"
