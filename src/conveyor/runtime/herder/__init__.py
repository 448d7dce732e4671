"""A connector's driver as the rest of the runtime may know it: the :class:`~.protocol.Herder`
protocol (Kafka Connect's ``Herder``, for one connector), which the driver and its failed-start
stand-in implement and the control API serves, and the state the driver keeps: its lifecycle
(:mod:`.lifecycle`) and its view of each task (:mod:`.task_handles`, :mod:`.report_window`).
No Spark: what runs tasks is in :mod:`conveyor.runtime.driver`.
"""
