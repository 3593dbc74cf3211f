"""ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions: what a client learns about
the cluster before anything else."""

from __future__ import annotations

import re
import uuid
from typing import Any

from headwater.controller.topics import validate_topic_name
from headwater.coordinator.records import INTERNAL_TOPICS
from headwater.protocol.apis import ApiKey, Request, advertised_versions
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.security.acl import AclOperation, ResourceType
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext
from headwater.server.describe_topics import describe_page

SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")  # ApiVersions v3+ (KIP-511)
ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER = 1, 2  # DescribeCluster v1+ (KIP-919)


class MetadataApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.describe_topic_partitions,
        }

    def api_versions(self, req: Request) -> Any:
        body = req.body
        if req.version >= 3 and not (SOFTWARE_NAME.fullmatch(body.client_software_name or "")
                                     and SOFTWARE_NAME.fullmatch(body.client_software_version or "")):
            # ApiVersionsRequest.isValid: KIP-511's names are refused, with no versions listed.
            return req.response(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        return req.response(
            error_code=0,
            api_keys=advertised_versions(req.spec.response),
            throttle_time_ms=0,
        )

    async def metadata(self, req: Request) -> Any:
        body = req.body
        resp_cls = req.spec.response
        topic_cls = resp_cls.MetadataResponseTopic
        part_cls = topic_cls.MetadataResponsePartition
        unauthorized: set[str] = set()
        creating: dict[str, ErrorCode] = {}
        if body.topics is None or (req.version == 0 and not body.topics):
            # All topics: those the principal may not describe are left out, not refused.
            names = sorted(self.ctx.image.topics)
            if self.ctx.authz.enabled:
                names = [n for n in names if self.ctx.authz.topic(req, AclOperation.DESCRIBE, n, note=False)]
        else:
            names = []
            for t in body.topics:
                name = t.name
                if name is None and req.version >= 10 and t.topic_id is not None:
                    found = self.ctx.image.topic_by_id(t.topic_id)
                    name = found.name if found else None
                if name is not None:
                    names.append(name)
            allow = (body.allow_auto_topic_creation if req.version >= 4 else True) and self.ctx.config.auto_create_topics
            unauthorized = {n for n in names if not self.ctx.authz.topic(req, AclOperation.DESCRIBE, n)}
            if allow and not self.ctx.authz.cluster(req, AclOperation.CREATE, note=False):
                # Auto-creation needs CREATE on the cluster or on the topic (Kafka's rule).
                unauthorized |= {n for n in names if n not in unauthorized and n not in self.ctx.image.topics
                                 and not self.ctx.authz.topic(req, AclOperation.CREATE, n)}
            missing = [n for n in dict.fromkeys(names) if n not in unauthorized and n not in self.ctx.image.topics]
            if allow and missing:
                # Auto-creation is never refused by the mutation quota, only recorded (Kafka's permissive quota).
                creating = await self.ctx.topic_creator.auto_create(missing, self.ctx.request_quota(req, strict=False))
        topics = []
        for name in names:
            topic = self.ctx.image.topics.get(name)
            if name in unauthorized:
                topics.append(topic_cls(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                        topic_id=uuid.UUID(int=0), is_internal=False, partitions=[]))
                continue
            if name in creating:
                # Created (or being created) by this request: no leaders yet as far as clients should
                # know, even where this broker made them at once (KafkaApis answers the same).
                topics.append(topic_cls(error_code=creating[name], name=name, topic_id=uuid.UUID(int=0),
                                        is_internal=name in INTERNAL_TOPICS, partitions=[]))
                continue
            if topic is None:
                try:
                    validate_topic_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                topics.append(topic_cls(error_code=code, name=name, topic_id=uuid.UUID(int=0), is_internal=False, partitions=[]))
                continue
            partitions = [
                part_cls(
                    error_code=0,
                    partition_index=p,
                    leader_id=s.leader,
                    leader_epoch=s.leader_epoch,
                    replica_nodes=list(s.replicas),
                    isr_nodes=list(s.isr),
                    offline_replicas=[r for r in s.replicas if r not in self.ctx.image.brokers or r in s.offline_replicas],
                )
                for p, s in sorted(topic.partitions.items())
            ]
            extra: dict[str, Any] = {}
            if req.version >= 8 and body.include_topic_authorized_operations:
                extra["authorized_operations"] = self.ctx.authz.authorized_operations(req, ResourceType.TOPIC, name)
            topics.append(topic_cls(error_code=0, name=name, topic_id=topic.topic_id, is_internal=name in INTERNAL_TOPICS,
                                    partitions=partitions, **extra))
        brokers = [
            resp_cls.MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b, host, port in self.ctx.client_brokers()
        ]
        cluster_ops: dict[str, Any] = {}
        if 8 <= req.version <= 10 and body.include_cluster_authorized_operations:
            cluster_ops["authorized_operations"] = self.ctx.authz.authorized_operations(req, ResourceType.CLUSTER)
        return req.response(
            throttle_time_ms=0,
            brokers=brokers,
            cluster_id=self.ctx.image.cluster_id,
            controller_id=self.ctx.image.controller_id,
            topics=topics,
            **cluster_ops,
        )

    def describe_cluster(self, req: Request) -> Any:
        if req.version >= 1 and req.body.endpoint_type != ENDPOINT_TYPE_BROKER:
            # A broker answers only for brokers (KIP-919; Kafka's AuthHelper.computeDescribeClusterResponse).
            known = req.body.endpoint_type == ENDPOINT_TYPE_CONTROLLER
            return req.response(
                throttle_time_ms=0, cluster_id=self.ctx.image.cluster_id, controller_id=-1, brokers=[],
                error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE if known else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                error_message=("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                               "type CONTROLLER" if known else f"Unsupported endpoint type {req.body.endpoint_type}"))
        brokers = [
            req.spec.response.DescribeClusterBroker(broker_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b, host, port in self.ctx.client_brokers()
        ]
        cluster_ops: dict[str, Any] = {}
        if req.body.include_cluster_authorized_operations:
            cluster_ops["authorized_operations"] = self.ctx.authz.authorized_operations(req, ResourceType.CLUSTER)
        return req.response(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            cluster_id=self.ctx.image.cluster_id,
            controller_id=self.ctx.image.controller_id,
            brokers=brokers,
            **cluster_ops,
        )

    def describe_topic_partitions(self, req: Request) -> Any:
        """DescribeTopicPartitions (what the Java admin client's describeTopics uses since Kafka 3.8),
        as Kafka's DescribeTopicPartitionsRequestHandler answers it; the paging is describe_page's."""
        body = req.body
        T = req.spec.response.DescribeTopicPartitionsResponseTopic
        P = T.DescribeTopicPartitionsResponsePartition
        all_topics = not body.topics
        cursor = (body.cursor.topic_name, body.cursor.partition_index) if body.cursor is not None else None
        start = cursor[0] if cursor is not None else ""
        names = [n for n in dict.fromkeys(sorted(self.ctx.image.topics) if all_topics else [t.name for t in body.topics])
                 if n >= start]
        if cursor is not None and ((not all_topics and cursor[0] not in names) or cursor[1] < 0):
            # The cursor must name a requested topic and a real partition: the whole request is invalid.
            return req.response(throttle_time_ms=0, next_cursor=None, topics=[
                T(error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=uuid.UUID(int=0), is_internal=False,
                  partitions=[]) for t in body.topics])
        # Topics the principal may not describe: refused by name when named, silently left out otherwise.
        allowed = [n for n in names if self.ctx.authz.topic(req, AclOperation.DESCRIBE, n, note=not all_topics)]
        permitted = set(allowed)
        refused = [] if all_topics else [n for n in names if n not in permitted]
        limit = max(min(self.ctx.config.max_request_partition_size_limit, body.response_partition_limit), 1)
        page = describe_page(self.ctx.image, allowed, cursor, limit, all_topics)
        topics = []
        for t in page.topics:
            found = self.ctx.image.topics.get(t.name)
            topics.append(T(
                error_code=t.error, name=t.name, topic_id=found.topic_id if found is not None else uuid.UUID(int=0),
                is_internal=t.name in INTERNAL_TOPICS,
                # Kafka's 32-bit field of operation codes (Utils.to32BitField); the schema types it int32 here.
                topic_authorized_operations=sum(1 << op for op in self.ctx.authz.authorized_operations(
                    req, ResourceType.TOPIC, t.name)),
                partitions=[P(error_code=0, partition_index=p, leader_id=s.leader if s.leader in self.ctx.image.brokers else -1,
                              leader_epoch=s.leader_epoch, replica_nodes=list(s.replicas), isr_nodes=list(s.isr),
                              eligible_leader_replicas=None, last_known_elr=None,
                              offline_replicas=[r for r in s.replicas
                                                if r not in self.ctx.image.brokers or r in s.offline_replicas])
                            for p, s in t.partitions]))
        topics += [T(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n, topic_id=uuid.UUID(int=0), is_internal=False,
                     partitions=[]) for n in refused]
        next_cursor = None
        if page.next_cursor is not None:
            next_cursor = req.spec.response.Cursor(topic_name=page.next_cursor[0], partition_index=page.next_cursor[1])
        return req.response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
