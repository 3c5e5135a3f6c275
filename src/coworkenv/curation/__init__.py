"""Curation: select rollouts and convert them into SFT conversations."""
