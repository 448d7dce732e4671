"""A task's error handling, as Kafka Connect's ``runtime/errors/``: ``errors.tolerance``,
retries and error logging (:mod:`.tolerance`), and the dead-letter queue
(:mod:`.dead_letter_queue`)."""
