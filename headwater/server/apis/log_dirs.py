"""DescribeLogDirs (this broker's log directories, their partitions and sizes, moves in progress)
and AlterReplicaLogDirs (move a replica to another of them)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode
from headwater.security.acl import AclOperation
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext


class LogDirApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
                ApiKey.ALTER_REPLICA_LOG_DIRS: self.alter_replica_log_dirs}

    def describe_log_dirs(self, req: Request) -> Any:
        result_cls = req.spec.response.DescribeLogDirsResult
        topic_cls = result_cls.DescribeLogDirsTopic
        part_cls = topic_cls.DescribeLogDirsPartition
        if not self.ctx.authz.cluster(req, AclOperation.DESCRIBE):
            refused: dict[str, Any] = {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED} if req.version >= 3 else {}
            return req.response(throttle_time_ms=0, results=[], **refused)
        wanted = None
        if req.body.topics is not None:
            wanted = {(t.topic, p) for t in req.body.topics for p in t.partitions}
        logs = self.ctx.logs
        by_dir: dict[Path, dict[str, list[Any]]] = {d: {} for d in self.ctx.config.log_dirs}
        for plog in logs.all_logs():
            if wanted is not None and (plog.topic, plog.partition) not in wanted:
                continue
            entry = part_cls(partition_index=plog.partition, partition_size=plog.size_bytes,
                             offset_lag=0, is_future_key=False)
            by_dir.setdefault(logs.log_dir_of(plog), {}).setdefault(plog.topic, []).append(entry)
        for future in logs.future_logs():
            if wanted is not None and (future.topic, future.partition) not in wanted:
                continue
            # Kafka's getLogEndOffsetLag: how far the future log is behind the current one.
            current = logs.get(future.topic, future.partition)
            lag = current.log_end_offset - future.log_end_offset if current is not None else -1
            entry = part_cls(partition_index=future.partition, partition_size=future.size_bytes,
                             offset_lag=lag, is_future_key=True)
            by_dir.setdefault(logs.future_dir_of(future), {}).setdefault(future.topic, []).append(entry)
        results = []
        for d, topics in by_dir.items():
            if d in logs.offline_dirs:
                # Kafka lists an offline dir with KAFKA_STORAGE_ERROR and nothing in it.
                offline: dict[str, Any] = dict(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(d), topics=[])
                if req.version >= 4:
                    offline.update(total_bytes=-1, usable_bytes=-1)
                results.append(result_cls(**offline))
                continue
            fields: dict[str, Any] = dict(error_code=0, log_dir=str(d), topics=[
                topic_cls(name=name, partitions=sorted(parts, key=lambda x: x.partition_index))
                for name, parts in sorted(topics.items())
            ])
            if req.version >= 4:
                usage = shutil.disk_usage(d)
                fields.update(total_bytes=usage.total, usable_bytes=usage.free)
            results.append(result_cls(**fields))
        extra: dict[str, Any] = {"error_code": 0} if req.version >= 3 else {}
        return req.response(throttle_time_ms=0, results=results, **extra)

    def alter_replica_log_dirs(self, req: Request) -> Any:
        """Kafka's ``KafkaApis.handleAlterReplicaLogDirsRequest``: ALTER on the cluster, else every
        partition answers CLUSTER_AUTHORIZATION_FAILED; a partition named under two dirs goes to the
        last one (the request is read into a map)."""
        topic_cls = req.spec.response.AlterReplicaLogDirTopicResult
        part_cls = topic_cls.AlterReplicaLogDirPartitionResult
        dirs = req.body.dirs
        if not self.ctx.authz.cluster(req, AclOperation.ALTER):
            return req.response(throttle_time_ms=0, results=[
                topic_cls(topic_name=t.name, partitions=[
                    part_cls(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for p in t.partitions])
                for d in dirs for t in d.topics])
        wanted: dict[tuple[str, int], str] = {}
        for d in dirs:
            for t in d.topics:
                for p in t.partitions:
                    wanted[(t.name, p)] = d.path
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), path in wanted.items():
            code = self.ctx.replicas.alter_log_dir(topic, partition, path)
            by_topic.setdefault(topic, []).append(part_cls(partition_index=partition, error_code=code))
        return req.response(throttle_time_ms=0, results=[
            topic_cls(topic_name=name, partitions=parts) for name, parts in by_topic.items()])
