"""A sink task's runner (Kafka Connect's ``WorkerSinkTask``) and the context it gives the task."""
