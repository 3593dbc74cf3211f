"""The one error type the Spark data source raises on purpose.

Spark wraps whatever a Python data source raises into its own exception (on the driver
``AnalysisException`` / ``PythonException``, in a task a failed job), keeping the message. So the
message is the interface: every ``TopicSourceError`` names what went wrong, for which topic or
partition, and what the user can do about it.
"""

from __future__ import annotations


class TopicSourceError(Exception):
    """A read or write of Kafka-protocol topics that cannot give correct results."""


class DataLossError(TopicSourceError):
    """Records the query asked for are no longer (or not yet) in the log.

    Raised when ``failOnDataLoss`` is true (the default); with ``failOnDataLoss=false`` the reader
    logs the gap and carries on from the first record that still exists.
    """
