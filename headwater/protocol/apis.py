"""The APIs this broker speaks, their version ranges, and the message classes behind them.

Message encoding and decoding is kafka-python 3's, which builds its classes from Kafka's own JSON
message schemas; this module only picks the classes and the version ranges we advertise. The
ranges follow what real clients send (kafka-python 3.0.12, librdkafka 2.16 and kcat's 2.0.2) and
stop below versions whose semantics we do not implement yet (e.g. Produce v13 addresses topics by
id only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from headwater.protocol import control_wire
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.frame import parse_request_header, response_header
from headwater.protocol.interbroker import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from headwater.protocol.strict import decode_body


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_RECORDS = 21
    TXN_OFFSET_COMMIT = 28
    OFFSET_FOR_LEADER_EPOCH = 23
    INIT_PRODUCER_ID = 22
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    OFFSET_DELETE = 47
    CREATE_PARTITIONS = 37
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: ApiKey
    min_version: int
    max_version: int
    request: Any
    response: Any

    def is_flexible(self, version: int) -> bool:
        return bool(self.request.flexible_version_q(version))


def _spec(key: ApiKey, lo: int, hi: int, request: Any, response: Any) -> ApiSpec:
    return ApiSpec(key, lo, hi, request, response)


API_SPECS: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _spec(ApiKey.PRODUCE, 3, 11, ProduceRequest, ProduceResponse),
        _spec(ApiKey.FETCH, 4, 17, FetchRequest, FetchResponse),
        _spec(ApiKey.LIST_OFFSETS, 0, 11, ListOffsetsRequest, ListOffsetsResponse),
        _spec(ApiKey.METADATA, 0, 13, MetadataRequest, MetadataResponse),
        _spec(ApiKey.DELETE_RECORDS, 0, 2, DeleteRecordsRequest, DeleteRecordsResponse),
        _spec(ApiKey.INIT_PRODUCER_ID, 0, 5, InitProducerIdRequest, InitProducerIdResponse),
        _spec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        _spec(ApiKey.API_VERSIONS, 0, 4, ApiVersionsRequest, ApiVersionsResponse),
        _spec(ApiKey.CREATE_TOPICS, 2, 7, CreateTopicsRequest, CreateTopicsResponse),
        _spec(ApiKey.DELETE_TOPICS, 1, 6, DeleteTopicsRequest, DeleteTopicsResponse),
        _spec(ApiKey.DESCRIBE_CONFIGS, 1, 4, DescribeConfigsRequest, DescribeConfigsResponse),
        _spec(ApiKey.ALTER_CONFIGS, 0, 2, AlterConfigsRequest, AlterConfigsResponse),
        _spec(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 2, AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
        _spec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, DescribeLogDirsRequest, DescribeLogDirsResponse),
        _spec(ApiKey.CREATE_PARTITIONS, 0, 3, CreatePartitionsRequest, CreatePartitionsResponse),
        _spec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        _spec(ApiKey.DESCRIBE_CLUSTER, 0, 2, DescribeClusterRequest, DescribeClusterResponse),
        _spec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse),
        _spec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, AlterPartitionReassignmentsRequest,
              AlterPartitionReassignmentsResponse),
        _spec(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, ListPartitionReassignmentsRequest,
              ListPartitionReassignmentsResponse),
        _spec(ApiKey.ELECT_LEADERS, 0, 2, ElectLeadersRequest, ElectLeadersResponse),
        _spec(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, DescribeClientQuotasRequest, DescribeClientQuotasResponse),
        _spec(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, AlterClientQuotasRequest, AlterClientQuotasResponse),
        # Consumer groups. FindCoordinator v5 and v6 only add error codes (TRANSACTION_ABORTABLE) and a
        # key type (share groups, answered INVALID_REQUEST like any key type not served here);
        # OffsetCommit / OffsetFetch stop below v10 (topic ids only).
        _spec(ApiKey.FIND_COORDINATOR, 0, 6, FindCoordinatorRequest, FindCoordinatorResponse),
        _spec(ApiKey.JOIN_GROUP, 0, 9, JoinGroupRequest, JoinGroupResponse),
        _spec(ApiKey.SYNC_GROUP, 0, 5, SyncGroupRequest, SyncGroupResponse),
        _spec(ApiKey.HEARTBEAT, 0, 4, HeartbeatRequest, HeartbeatResponse),
        _spec(ApiKey.LEAVE_GROUP, 0, 5, LeaveGroupRequest, LeaveGroupResponse),
        _spec(ApiKey.OFFSET_COMMIT, 2, 9, OffsetCommitRequest, OffsetCommitResponse),
        _spec(ApiKey.OFFSET_FETCH, 1, 9, OffsetFetchRequest, OffsetFetchResponse),
        _spec(ApiKey.OFFSET_DELETE, 0, 0, OffsetDeleteRequest, OffsetDeleteResponse),
        # v3 adds the group membership fields; v4 only lets the broker answer TRANSACTION_ABORTABLE
        # (which we never send), so v0-v4, as Kafka 3.9; v5 is KIP-890's transactions v2.
        _spec(ApiKey.TXN_OFFSET_COMMIT, 0, 4, TxnOffsetCommitRequest, TxnOffsetCommitResponse),
        _spec(ApiKey.LIST_GROUPS, 0, 5, ListGroupsRequest, ListGroupsResponse),
        _spec(ApiKey.DESCRIBE_GROUPS, 0, 5, DescribeGroupsRequest, DescribeGroupsResponse),
        _spec(ApiKey.DELETE_GROUPS, 0, 2, DeleteGroupsRequest, DeleteGroupsResponse),
        # Transactions (KIP-98), at Kafka 3.9's ranges. AddPartitionsToTxn v4+ is the brokers' batched
        # form (KIP-890 verification); AddOffsetsToTxn and EndTxn v4 only allow TRANSACTION_ABORTABLE.
        _spec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
        _spec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
        _spec(ApiKey.END_TXN, 0, 4, EndTxnRequest, EndTxnResponse),
        _spec(ApiKey.WRITE_TXN_MARKERS, 1, 1, WriteTxnMarkersRequest, WriteTxnMarkersResponse),
        _spec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, DescribeProducersRequest, DescribeProducersResponse),
        _spec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, DescribeTransactionsRequest, DescribeTransactionsResponse),
        _spec(ApiKey.LIST_TRANSACTIONS, 0, 1, ListTransactionsRequest, ListTransactionsResponse),
        _spec(ApiKey.DESCRIBE_ACLS, 0, 3, DescribeAclsRequest, DescribeAclsResponse),
        _spec(ApiKey.CREATE_ACLS, 0, 3, CreateAclsRequest, CreateAclsResponse),
        _spec(ApiKey.DELETE_ACLS, 0, 3, DeleteAclsRequest, DeleteAclsResponse),
        _spec(ApiKey.SASL_HANDSHAKE, 0, 1, SaslHandshakeRequest, SaslHandshakeResponse),
        _spec(ApiKey.SASL_AUTHENTICATE, 0, 2, SaslAuthenticateRequest, SaslAuthenticateResponse),
        _spec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, DescribeUserScramCredentialsRequest,
              DescribeUserScramCredentialsResponse),
        _spec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, AlterUserScramCredentialsRequest,
              AlterUserScramCredentialsResponse),
        # Inter-broker (ZooKeeper mode), advertised like a Kafka 3.4+ ZK broker does. ControlledShutdown
        # starts at v1: v0's request header has no client id, which decode_request does not parse.
        _spec(ApiKey.LEADER_AND_ISR, 0, 7, LeaderAndIsrRequest, LeaderAndIsrResponse),
        _spec(ApiKey.STOP_REPLICA, 0, 4, StopReplicaRequest, StopReplicaResponse),
        _spec(ApiKey.UPDATE_METADATA, 0, 8, UpdateMetadataRequest, UpdateMetadataResponse),
        _spec(ApiKey.CONTROLLED_SHUTDOWN, 1, 3, ControlledShutdownRequest, ControlledShutdownResponse),
        _spec(ApiKey.ALTER_PARTITION, 0, 3, AlterPartitionRequest, AlterPartitionResponse),
    )
}


@dataclass(slots=True)
class Request:
    spec: ApiSpec
    version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kafka-python request object
    # Who sent it, as the server fills it in per request: the connection's principal and "host:port".
    principal: str = "User:ANONYMOUS"
    client_address: str = ""
    # What authorization checks refused while it was handled (audit records of the resources).
    denied: list[Any] = field(default_factory=list)
    # When its frame was read off the socket (time.perf_counter(); 0: not from a socket), where
    # Kafka's request time starts (RequestChannel.Request.startTimeNanos).
    arrived_s: float = 0.0

    @property
    def api_key(self) -> int:
        return int(self.spec.key)

    def response(self, **fields: Any) -> Any:
        """A response object of this request's API and version."""
        return self.spec.response(version=self.version, **fields)


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a whole request frame body (without the size prefix).

    Raises KafkaError(UNSUPPORTED_VERSION) for an unknown key or version, and MalformedFrameError
    (a ValueError) for bytes that are not a valid request of that version, decoded as strictly as
    Kafka's own parser does (``protocol/strict.py``): a field that runs past the frame or a
    non-nullable field sent as null. Bytes left over after the last field are ignored, as Kafka does.
    """
    view = memoryview(frame)
    key = int.from_bytes(view[0:2], "big", signed=True) if len(view) >= 2 else -1
    version = int.from_bytes(view[2:4], "big", signed=True) if len(view) >= 4 else -1
    spec = API_SPECS.get(key)
    if spec is None or not spec.min_version <= version <= spec.max_version:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"api key {key} version {version} is not supported")
    header = parse_request_header(view, spec.is_flexible(version))
    if control_wire.reads(key, version):
        # The controller's bulk requests: read without an object per field (control_wire.py).
        body = control_wire.decode(key, version, view[header.body_offset :])
    else:
        body = decode_body(spec.request, version, view[header.body_offset :])
    return Request(spec, version, header.correlation_id, header.client_id, body)


def encode_response(request: Request, response: Any) -> bytes:
    """Frame a response object: size, header, body."""
    flexible = request.spec.is_flexible(request.version) and request.spec.key != ApiKey.API_VERSIONS
    body: bytes = response.encode(version=request.version)
    head = response_header(request.correlation_id, flexible)
    return (len(head) + len(body)).to_bytes(4, "big") + head + body


def api_versions_unsupported(correlation_id: int) -> bytes:
    """ApiVersions v0 with UNSUPPORTED_VERSION and our ranges, so a newer client retries lower."""
    resp = ApiVersionsResponse(
        version=0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=advertised_versions(ApiVersionsResponse),
    )
    body: bytes = resp.encode(version=0)
    head = response_header(correlation_id, False)
    return (len(head) + len(body)).to_bytes(4, "big") + head + body


def advertised_versions(response_cls: Any) -> list[Any]:
    return [
        response_cls.ApiVersion(api_key=int(s.key), min_version=s.min_version, max_version=s.max_version)
        for s in sorted(API_SPECS.values(), key=lambda s: int(s.key))
    ]
