"""Loom physical controller."""
