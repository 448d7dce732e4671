"""A source task's runner (Kafka Connect's ``WorkerSourceTask`` and, for exactly-once,
``ExactlyOnceWorkerSourceTask``), the context it gives the task, and its per-partition
bookkeeping."""
