"""Conveyor: Kafka-Connect-style connectors in Python, run as Spark applications on Kubernetes.

The rooms (see the README's "Layout"): :mod:`conveyor.api` (the connector API),
:mod:`conveyor.runtime` (driver, REST, tasks, by the process each part runs in),
:mod:`conveyor.control` (the control API's contract and client), :mod:`conveyor.manifest`,
:mod:`conveyor.converters`, :mod:`conveyor.schema_registry`, :mod:`conveyor.transforms`,
:mod:`conveyor.java_text`, :mod:`conveyor.connectors`, :mod:`conveyor.testing` and the
``conveyor`` command (:mod:`conveyor.cli`).
"""
