"""The control API's contract, shared by every process that speaks it.

The driver serves the control API (:mod:`conveyor.runtime.rest.server`); its task runners
report to it and take directives from it; the ``conveyor`` commands, the operator and the test
harness call it. What they share lives here, free of Spark, Kafka and Kubernetes:

* :mod:`.protocol`: what travels: :class:`~.protocol.TaskSpec` (to an executor, pickled),
  :class:`~.protocol.TaskReport` and :class:`~.protocol.Directive` (JSON), task states;
* :mod:`.auth`: who may call: the admin and task bearer tokens and where they are kept;
* :mod:`.errors`: how a call fails, on either side;
* :mod:`.client`: the one client of the API (:class:`~.client.DriverClient`).

A new endpoint's wire types go in :mod:`.protocol`, its call in :mod:`.client`.
"""
