"""DescribeLogDirs: this broker's log directories, their partitions and sizes."""

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
        return {ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs}

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
        by_dir: dict[Path, dict[str, list[Any]]] = {d: {} for d in self.ctx.config.log_dirs}
        for plog in self.ctx.logs.all_logs():
            if wanted is not None and (plog.topic, plog.partition) not in wanted:
                continue
            entry = part_cls(partition_index=plog.partition, partition_size=plog.size_bytes,
                             offset_lag=0, is_future_key=False)
            by_dir.setdefault(self.ctx.logs.log_dir_of(plog), {}).setdefault(plog.topic, []).append(entry)
        results = []
        for d, topics in by_dir.items():
            if d in self.ctx.logs.offline_dirs:
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
