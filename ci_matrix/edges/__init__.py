"""Edges: files, processes, GitHub (workflow commands, API)."""
