"""Conveyor's runtime (private): the Spark driver, task runners and control plane."""
