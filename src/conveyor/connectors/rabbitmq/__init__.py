"""RabbitMQ sink connector (entry point ``rabbitmq-sink``).

Modules: :mod:`.config` (configuration keys), :mod:`.sink` (connector and task: delivery,
commits, provisioning and cleanup of queues), :mod:`.link` (one AMQP connection with
asynchronous publisher confirms), :mod:`.encoding` (records → message bodies and headers).
Uses only :mod:`conveyor.api`, pika and pydantic.
"""

from conveyor.connectors.rabbitmq.config import RabbitMQSinkConfig
from conveyor.connectors.rabbitmq.sink import RabbitMQSinkConnector, RabbitMQSinkTask

__all__ = ["RabbitMQSinkConfig", "RabbitMQSinkConnector", "RabbitMQSinkTask"]
