"""Shared pieces of Loom's daemons: process supervision, ovsdb-server deployment, the `loom` CLI."""
