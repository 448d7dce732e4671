"""What runs inside a Spark executor's Python worker, one task per Spark job: the job's body
(:mod:`.executor`), what sink and source runners share (:mod:`.runner`: the sequence of a run,
the link to the driver, :mod:`.meter`), and the runners themselves (:mod:`.sink`,
:mod:`.source`), as Kafka Connect's ``WorkerTask``, ``WorkerSinkTask`` and ``WorkerSourceTask``.

Nothing here loads driver code: a task knows its driver only through the control API
(:mod:`conveyor.control`). A new step of a task's run goes in :mod:`.runner`; of a sink's or a
source's loop, in its room.
"""
