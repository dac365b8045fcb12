"""Scan build logs for known failure signatures (pure: streams in, hits out)."""
