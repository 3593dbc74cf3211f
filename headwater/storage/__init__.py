"""Durable segmented partition logs in Kafka's on-disk formats."""

from headwater.storage.config import LogConfig
from headwater.storage.log import AppendResult, FileSlice, PartitionLog, ReadResult
from headwater.storage.manager import LogManager

__all__ = ["AppendResult", "FileSlice", "LogConfig", "LogManager", "PartitionLog", "ReadResult"]
