"""RabbitMQ sink connector (entry point ``rabbitmq-sink``).

Modules: :mod:`.config` (configuration keys), :mod:`.sink` (the connector, and the delivery
contract), :mod:`.task` (the task: delivery, commits, queues it declares and deletes),
:mod:`.outbox` (messages published and not yet committed), :mod:`.link` (one AMQP connection
with asynchronous publisher confirms), :mod:`.topology` (declaring, checking and deleting queues),
:mod:`.encoding` (records → message bodies and headers).
Uses only :mod:`conveyor.api`, pika and pydantic.
"""

from conveyor.connectors.rabbitmq.config import RabbitMQSinkConfig
from conveyor.connectors.rabbitmq.sink import RabbitMQSinkConnector
from conveyor.connectors.rabbitmq.task import RabbitMQSinkTask

__all__ = ["RabbitMQSinkConfig", "RabbitMQSinkConnector", "RabbitMQSinkTask"]
