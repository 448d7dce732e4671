"""Connectors shipped with Conveyor (each in its own sub-package, registered as entry points)."""
