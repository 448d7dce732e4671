"""The connector's driver, a PySpark application (Kafka Connect's herder for one connector):
:class:`~.driver.Driver` and its lifecycle steps, the SparkSession it creates
(:mod:`.spark_session`), how it runs each task as a Spark job (:mod:`.task_launcher`), what it
serves when the connector cannot start (:mod:`.failed_start`) and what ``conveyor run`` shows
(:mod:`.progress`). A new lifecycle step goes in :mod:`.driver`.
"""
