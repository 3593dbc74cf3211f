"""The numbers DescribeConfigs, AlterConfigs and IncrementalAlterConfigs use on the wire (Kafka's
``ConfigResource.Type`` and ``AlterConfigOp.OpType``)."""

from __future__ import annotations

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
