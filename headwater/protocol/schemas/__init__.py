"""JSON message schemas for the inter-broker APIs kafka-python does not ship.

The files use Kafka's message-schema format (the one in Kafka's
``clients/src/main/resources/common/message``) so that kafka-python's ``ApiMessage`` can build the
classes; ``headwater.protocol.interbroker`` loads them. Field names, types and version ranges are
Kafka's wire format and must not change; the descriptions are ours.
"""
