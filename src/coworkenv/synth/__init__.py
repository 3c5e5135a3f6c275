"""Synthesis: coverage plans → generated, validated, repaired, packaged tasks."""
