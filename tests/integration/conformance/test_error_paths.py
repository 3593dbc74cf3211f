"""One error path for every API key the broker advertises, at its highest version, with the error
code Apache Kafka answers (3.9 ZooKeeper-mode broker unless said otherwise).

Each row names where Kafka decides it. The brokers are a 3-broker ZooKeeper cluster without an
authorizer, plus one standalone broker with an authorizer that grants nothing to ANONYMOUS (for the
APIs whose only error is an authorization one). A test checks that every advertised key has a row.
ListGroups is the exception that proves the rule: Kafka filters what a principal may not describe
instead of refusing, so its row checks that an unknown state filter answers NONE with no groups.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cluster_support import LocalCluster, start_cluster, wait_for
from hw_support import RawConnection

from headwater.admin.local import BrokerProcess, free_port
from headwater.protocol.apis import API_SPECS, ApiKey

K = ApiKey
NONE, UNKNOWN_TOPIC_OR_PARTITION, STALE_CONTROLLER_EPOCH, NOT_COORDINATOR = 0, 3, 11, 16
COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID, CLUSTER_AUTHORIZATION_FAILED = 15, 25, 31
ILLEGAL_SASL_STATE, UNSUPPORTED_VERSION, TOPIC_ALREADY_EXISTS, NOT_CONTROLLER = 34, 35, 36, 41
INVALID_REQUEST, SECURITY_DISABLED, GROUP_ID_NOT_FOUND, RESOURCE_NOT_FOUND = 42, 54, 69, 91
UNKNOWN_TOPIC_ID, MISMATCHED_ENDPOINT_TYPE = 100, 114
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
GROUP = "conformance-group"


@dataclass
class Where:
    """Addresses for the rows: the controller, a broker that is not, the group's coordinator and a
    broker that is not, the authorizing standalone broker, a topic that exists."""

    controller: str
    other: str
    coordinator: str
    not_coordinator: str
    secured: str
    topic: str


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Where]:
    root = tmp_path_factory.mktemp("error-paths")
    cluster: LocalCluster = start_cluster(root / "cluster", 3)
    secured = BrokerProcess(9, free_port(), root / "secured", {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"})
    try:
        secured.start()
        topic = f"present-{uuid.uuid4().hex[:6]}"
        cluster.create_topic(topic, 1, 3)
        cluster.wait_full_isr([topic], 1)
        controller = cluster.controller_id()
        brokers = {b: cluster.brokers[b].bootstrap for b in cluster.brokers}
        other = next(b for b in brokers if b != controller)

        def coordinator() -> int:
            with RawConnection(brokers[controller]) as conn:
                resp = ask(conn, K.FIND_COORDINATOR, 3, key=GROUP, key_type=0)
            return int(resp.node_id) if resp.error_code == 0 else 0

        coord = wait_for(coordinator, 30, "the group's coordinator")
        yield Where(brokers[controller], brokers[other], brokers[coord],
                    brokers[next(b for b in brokers if b != coord)], secured.bootstrap, topic)
    finally:
        secured.stop()
        cluster.stop()


def ask(conn: RawConnection, api: ApiKey, version: int, **fields: Any) -> Any:
    spec = API_SPECS[api]
    return conn.request(spec.request(version=version, **fields), spec.response, version)


R = Callable[[Where], tuple[str, ApiKey, int, dict[str, Any], Callable[[Any], int], int]]
ROWS: dict[ApiKey, R] = {}


def row(key: ApiKey) -> Callable[[R], R]:
    def add(f: R) -> R:
        ROWS[key] = f
        return f
    return add


def missing() -> str:
    return f"missing-{uuid.uuid4().hex[:8]}"


# --- data path: ReplicaManager / KafkaApis answer per partition -------------------------------------------

@row(K.PRODUCE)  # KafkaApis.handleProduceRequest: a topic not in the metadata cache
def _produce(w: Where) -> Any:
    T = API_SPECS[K.PRODUCE].request.TopicProduceData
    return (w.other, K.PRODUCE, 11, dict(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        T(name=missing(), partition_data=[T.PartitionProduceData(index=0, records=None)])]),
        lambda r: r.responses[0].partition_responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.FETCH)  # KafkaApis.handleFetchRequest v13+: a topic id not in the metadata cache
def _fetch(w: Where) -> Any:
    T = API_SPECS[K.FETCH].request.FetchTopic
    return (w.other, K.FETCH, 17, dict(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                       session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
        T(topic_id=uuid.uuid4(), partitions=[T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                              last_fetched_epoch=-1, log_start_offset=-1,
                                                              partition_max_bytes=1 << 20)])]),
        lambda r: r.responses[0].partitions[0].error_code, UNKNOWN_TOPIC_ID)


@row(K.LIST_OFFSETS)  # ReplicaManager.fetchOffset: no such partition here
def _list_offsets(w: Where) -> Any:
    T = API_SPECS[K.LIST_OFFSETS].request.ListOffsetsTopic
    return (w.other, K.LIST_OFFSETS, 11, dict(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
        T(name=missing(), partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]),
        lambda r: r.topics[0].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.METADATA)  # KafkaApis.getTopicMetadata, allow_auto_topic_creation false
def _metadata(w: Where) -> Any:
    T = API_SPECS[K.METADATA].request.MetadataRequestTopic
    return (w.other, K.METADATA, 13, dict(topics=[T(topic_id=None, name=missing())], allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False),
            lambda r: r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.OFFSET_FOR_LEADER_EPOCH)  # ReplicaManager.lastOffsetForLeaderEpoch: no such partition
def _ofle(w: Where) -> Any:
    T = API_SPECS[K.OFFSET_FOR_LEADER_EPOCH].request.OffsetForLeaderTopic
    return (w.other, K.OFFSET_FOR_LEADER_EPOCH, 4, dict(replica_id=-1, topics=[T(topic=missing(), partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
        lambda r: r.topics[0].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.DELETE_RECORDS)  # ReplicaManager.deleteRecords: no such partition
def _delete_records(w: Where) -> Any:
    T = API_SPECS[K.DELETE_RECORDS].request.DeleteRecordsTopic
    return (w.other, K.DELETE_RECORDS, 2, dict(timeout_ms=1000, topics=[
        T(name=missing(), partitions=[T.DeleteRecordsPartition(partition_index=0, offset=0)])]),
        lambda r: r.topics[0].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.INIT_PRODUCER_ID)  # TransactionCoordinator.handleInitProducerId: an empty transactional id
def _init_producer_id(w: Where) -> Any:
    return (w.other, K.INIT_PRODUCER_ID, 5, dict(transactional_id="", transaction_timeout_ms=60000, producer_id=-1,
                                                 producer_epoch=-1),
            lambda r: r.error_code, INVALID_REQUEST)


# --- transactions: KafkaApis' authorization first, then the TransactionCoordinator ---------------------------

@row(K.ADD_PARTITIONS_TO_TXN)  # KafkaApis.handleAddPartitionsToTxnRequest v4+: brokers only (CLUSTER_ACTION)
def _add_partitions_to_txn(w: Where) -> Any:
    return (w.secured, K.ADD_PARTITIONS_TO_TXN, 4, dict(transactions=[]), lambda r: r.error_code,
            CLUSTER_AUTHORIZATION_FAILED)


@row(K.ADD_OFFSETS_TO_TXN)  # KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the transactional id
def _add_offsets_to_txn(w: Where) -> Any:
    return (w.secured, K.ADD_OFFSETS_TO_TXN, 4, dict(transactional_id="tx", producer_id=1, producer_epoch=0,
                                                     group_id=GROUP), lambda r: r.error_code,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


@row(K.END_TXN)  # KafkaApis.handleEndTxnRequest: WRITE on the transactional id
def _end_txn(w: Where) -> Any:
    return (w.secured, K.END_TXN, 4, dict(transactional_id="tx", producer_id=1, producer_epoch=0, committed=True),
            lambda r: r.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


@row(K.WRITE_TXN_MARKERS)  # KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION, else every partition refused
def _write_txn_markers(w: Where) -> Any:
    M = API_SPECS[K.WRITE_TXN_MARKERS].request.WritableTxnMarker
    return (w.secured, K.WRITE_TXN_MARKERS, 1, dict(markers=[M(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[M.WritableTxnMarkerTopic(name=missing(), partition_indexes=[0])])]),
        lambda r: r.markers[0].topics[0].partitions[0].error_code, CLUSTER_AUTHORIZATION_FAILED)


@row(K.TXN_OFFSET_COMMIT)  # KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id
def _txn_offset_commit(w: Where) -> Any:
    T = API_SPECS[K.TXN_OFFSET_COMMIT].request.TxnOffsetCommitRequestTopic
    return (w.secured, K.TXN_OFFSET_COMMIT, 4, dict(
        transactional_id="tx", group_id=GROUP, producer_id=1, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[T(name=missing(), partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None)])]),
        lambda r: r.topics[0].partitions[0].error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


@row(K.DESCRIBE_TRANSACTIONS)  # KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on the transactional id
def _describe_transactions(w: Where) -> Any:
    return (w.secured, K.DESCRIBE_TRANSACTIONS, 0, dict(transactional_ids=["tx"]),
            lambda r: r.transaction_states[0].error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


@row(K.LIST_TRANSACTIONS)  # TransactionStateManager.listTransactionStates: an unknown state filter is listed
def _list_transactions(w: Where) -> Any:
    return (w.other, K.LIST_TRANSACTIONS, 1, dict(state_filters=["Bogus"], producer_id_filters=[], duration_filter=-1),
            lambda r: r.error_code if r.unknown_state_filters == ["Bogus"] else -1, NONE)


@row(K.DESCRIBE_PRODUCERS)  # ReplicaManager.activeProducerState: a partition the metadata does not know
def _describe_producers(w: Where) -> Any:
    T = API_SPECS[K.DESCRIBE_PRODUCERS].request.TopicRequest
    return (w.other, K.DESCRIBE_PRODUCERS, 0, dict(topics=[T(name=missing(), partition_indexes=[0])]),
            lambda r: r.topics[0].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


# --- inter-broker: ReplicaManager and the ZK controller ---------------------------------------------------

@row(K.LEADER_AND_ISR)  # ReplicaManager.becomeLeaderOrFollower: an older controller epoch
def _leader_and_isr(w: Where) -> Any:
    return (w.other, K.LEADER_AND_ISR, 7, dict(controller_id=1, controller_epoch=0, broker_epoch=-1, topic_states=[],
                                               live_leaders=[]), lambda r: r.error_code, STALE_CONTROLLER_EPOCH)


@row(K.STOP_REPLICA)  # ReplicaManager.stopReplicas: an older controller epoch
def _stop_replica(w: Where) -> Any:
    return (w.other, K.STOP_REPLICA, 4, dict(controller_id=1, controller_epoch=0, broker_epoch=-1, topic_states=[]),
            lambda r: r.error_code, STALE_CONTROLLER_EPOCH)


@row(K.UPDATE_METADATA)  # ReplicaManager.maybeUpdateMetadataCache: an older controller epoch
def _update_metadata(w: Where) -> Any:
    return (w.other, K.UPDATE_METADATA, 8, dict(controller_id=1, controller_epoch=0, broker_epoch=-1, topic_states=[],
                                                live_brokers=[]), lambda r: r.error_code, STALE_CONTROLLER_EPOCH)


@row(K.CONTROLLED_SHUTDOWN)  # KafkaController.controlledShutdown on a broker that is not the controller
def _controlled_shutdown(w: Where) -> Any:
    return (w.other, K.CONTROLLED_SHUTDOWN, 3, dict(broker_id=2, broker_epoch=-1), lambda r: r.error_code, NOT_CONTROLLER)


@row(K.ALTER_PARTITION)  # KafkaApis.handleAlterPartitionRequest: not the active controller
def _alter_partition(w: Where) -> Any:
    return (w.other, K.ALTER_PARTITION, 3, dict(broker_id=2, broker_epoch=-1, topics=[]), lambda r: r.error_code,
            NOT_CONTROLLER)


# --- controller APIs: NOT_CONTROLLER elsewhere, the controller's own errors on it ------------------------

@row(K.CREATE_TOPICS)  # ZkAdminManager.createTopics: TopicExistsException
def _create_topics(w: Where) -> Any:
    T = API_SPECS[K.CREATE_TOPICS].request.CreatableTopic
    return (w.controller, K.CREATE_TOPICS, 7, dict(timeout_ms=1000, validate_only=False, topics=[
        T(name=w.topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])]),
        lambda r: r.topics[0].error_code, TOPIC_ALREADY_EXISTS)


@row(K.DELETE_TOPICS)  # KafkaApis.handleDeleteTopicsRequest: not the controller
def _delete_topics(w: Where) -> Any:
    T = API_SPECS[K.DELETE_TOPICS].request.DeleteTopicState
    return (w.other, K.DELETE_TOPICS, 6, dict(timeout_ms=1000, topics=[T(name=w.topic, topic_id=None)]),
            lambda r: r.responses[0].error_code, NOT_CONTROLLER)


@row(K.CREATE_PARTITIONS)  # ZkAdminManager.createPartitions: the topic does not exist
def _create_partitions(w: Where) -> Any:
    T = API_SPECS[K.CREATE_PARTITIONS].request.CreatePartitionsTopic
    return (w.controller, K.CREATE_PARTITIONS, 3, dict(timeout_ms=1000, validate_only=False, topics=[
        T(name=missing(), count=2, assignments=None)]), lambda r: r.results[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.ALTER_PARTITION_REASSIGNMENTS)  # KafkaApis: not the controller
def _alter_reassignments(w: Where) -> Any:
    T = API_SPECS[K.ALTER_PARTITION_REASSIGNMENTS].request.ReassignableTopic
    return (w.other, K.ALTER_PARTITION_REASSIGNMENTS, 1, dict(timeout_ms=1000, allow_replication_factor_change=True,
                                                              topics=[T(name=w.topic, partitions=[
                                                                  T.ReassignablePartition(partition_index=0, replicas=[1])])]),
            lambda r: r.error_code, NOT_CONTROLLER)


@row(K.LIST_PARTITION_REASSIGNMENTS)  # KafkaApis: not the controller
def _list_reassignments(w: Where) -> Any:
    return (w.other, K.LIST_PARTITION_REASSIGNMENTS, 0, dict(timeout_ms=1000, topics=None), lambda r: r.error_code,
            NOT_CONTROLLER)


# --- groups: the GroupCoordinator ---------------------------------------------------------------------------

@row(K.FIND_COORDINATOR)  # KafkaApis.handleFindCoordinatorRequest: a key type it does not know
def _find_coordinator(w: Where) -> Any:
    return (w.other, K.FIND_COORDINATOR, 6, dict(key_type=7, coordinator_keys=["k"]),
            lambda r: r.coordinators[0].error_code, INVALID_REQUEST)


@row(K.JOIN_GROUP)  # GroupCoordinator.handleJoinGroup: not this group's coordinator
def _join_group(w: Where) -> Any:
    P = API_SPECS[K.JOIN_GROUP].request.JoinGroupRequestProtocol
    return (w.not_coordinator, K.JOIN_GROUP, 9, dict(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                                     member_id="", group_instance_id=None, protocol_type="consumer",
                                                     protocols=[P(name="range", metadata=b"")], reason=None),
            lambda r: r.error_code, NOT_COORDINATOR)


@row(K.HEARTBEAT)  # GroupCoordinator.handleHeartbeat: no such group, so no such member
def _heartbeat(w: Where) -> Any:
    return (w.coordinator, K.HEARTBEAT, 4, dict(group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None),
            lambda r: r.error_code, UNKNOWN_MEMBER_ID)


@row(K.LEAVE_GROUP)  # GroupCoordinator.handleLeaveGroup: no such group; each member UNKNOWN_MEMBER_ID
def _leave_group(w: Where) -> Any:
    M = API_SPECS[K.LEAVE_GROUP].request.MemberIdentity
    return (w.coordinator, K.LEAVE_GROUP, 5, dict(group_id=GROUP, members=[M(member_id="m", group_instance_id=None,
                                                                              reason=None)]),
            lambda r: r.members[0].error_code, UNKNOWN_MEMBER_ID)


@row(K.SYNC_GROUP)  # GroupCoordinator.handleSyncGroup: no such group, so no such member
def _sync_group(w: Where) -> Any:
    return (w.coordinator, K.SYNC_GROUP, 5, dict(group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None,
                                                 protocol_type="consumer", protocol_name="range", assignments=[]),
            lambda r: r.error_code, UNKNOWN_MEMBER_ID)


@row(K.OFFSET_COMMIT)  # KafkaApis.handleOffsetCommitRequest: a topic not in the metadata cache
def _offset_commit(w: Where) -> Any:
    T = API_SPECS[K.OFFSET_COMMIT].request.OffsetCommitRequestTopic
    return (w.coordinator, K.OFFSET_COMMIT, 9, dict(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                                    group_instance_id=None, topics=[T(name=missing(), partitions=[
                                                        T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                                       committed_leader_epoch=-1,
                                                                                       committed_metadata="")])]),
            lambda r: r.topics[0].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.OFFSET_FETCH)  # GroupCoordinator.handleFetchOffsets: not this group's coordinator
def _offset_fetch(w: Where) -> Any:
    G = API_SPECS[K.OFFSET_FETCH].request.OffsetFetchRequestGroup
    return (w.not_coordinator, K.OFFSET_FETCH, 9, dict(require_stable=False, groups=[
        G(group_id=GROUP, member_id=None, member_epoch=-1, topics=None)]),
        lambda r: r.groups[0].error_code, NOT_COORDINATOR)


@row(K.DESCRIBE_GROUPS)  # GroupCoordinator.handleDescribeGroup: not this group's coordinator
def _describe_groups(w: Where) -> Any:
    return (w.not_coordinator, K.DESCRIBE_GROUPS, 5, dict(groups=[GROUP], include_authorized_operations=False),
            lambda r: r.groups[0].error_code, NOT_COORDINATOR)


@row(K.LIST_GROUPS)  # no error to provoke (see the module doc): an unknown state filter matches nothing
def _list_groups(w: Where) -> Any:
    return (w.coordinator, K.LIST_GROUPS, 5, dict(states_filter=["NoSuchState"], types_filter=[]),
            lambda r: r.error_code if r.groups == [] else -1, NONE)


@row(K.DELETE_GROUPS)  # GroupCoordinator.handleDeleteGroups: no such group
def _delete_groups(w: Where) -> Any:
    return (w.coordinator, K.DELETE_GROUPS, 2, dict(groups_names=[GROUP + "-never"]),
            lambda r: r.results[0].error_code, GROUP_ID_NOT_FOUND)


@row(K.OFFSET_DELETE)  # GroupCoordinator.handleDeleteOffsets: no such group
def _offset_delete(w: Where) -> Any:
    T = API_SPECS[K.OFFSET_DELETE].request.OffsetDeleteRequestTopic
    return (w.coordinator, K.OFFSET_DELETE, 0, dict(group_id=GROUP + "-never", topics=[
        T(name=w.topic, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])]),
        lambda r: r.error_code, GROUP_ID_NOT_FOUND)


# --- security and configs --------------------------------------------------------------------------------

@row(K.SASL_HANDSHAKE)  # KafkaApis.handleSaslHandshakeRequest on a connection past authentication
def _sasl_handshake(w: Where) -> Any:
    return (w.other, K.SASL_HANDSHAKE, 1, dict(mechanism="PLAIN"), lambda r: r.error_code, ILLEGAL_SASL_STATE)


@row(K.SASL_AUTHENTICATE)  # KafkaApis.handleSaslAuthenticateRequest likewise
def _sasl_authenticate(w: Where) -> Any:
    return (w.other, K.SASL_AUTHENTICATE, 2, dict(auth_bytes=b"\x00u\x00p"), lambda r: r.error_code,
            ILLEGAL_SASL_STATE)


@row(K.API_VERSIONS)  # answered only for versions it knows; an invalid client software name is INVALID_REQUEST
def _api_versions(w: Where) -> Any:
    return (w.other, K.API_VERSIONS, 4, dict(client_software_name="bad name!", client_software_version="1"),
            lambda r: r.error_code, INVALID_REQUEST)


@row(K.DESCRIBE_ACLS)  # KafkaApis.handleDescribeAcls without an authorizer
def _describe_acls(w: Where) -> Any:
    return (w.other, K.DESCRIBE_ACLS, 3, dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                              principal_filter=None, host_filter=None, operation=1, permission_type=1),
            lambda r: r.error_code, SECURITY_DISABLED)


@row(K.CREATE_ACLS)  # KafkaApis.handleCreateAcls without an authorizer
def _create_acls(w: Where) -> Any:
    C = API_SPECS[K.CREATE_ACLS].request.AclCreation
    return (w.other, K.CREATE_ACLS, 3, dict(creations=[C(resource_type=2, resource_name="t", resource_pattern_type=3,
                                                         principal="User:a", host="*", operation=3, permission_type=3)]),
            lambda r: r.results[0].error_code, SECURITY_DISABLED)


@row(K.DELETE_ACLS)  # KafkaApis.handleDeleteAcls without an authorizer
def _delete_acls(w: Where) -> Any:
    F = API_SPECS[K.DELETE_ACLS].request.DeleteAclsFilter
    return (w.other, K.DELETE_ACLS, 3, dict(filters=[F(resource_type_filter=2, resource_name_filter="t",
                                                       pattern_type_filter=3, principal_filter=None, host_filter=None,
                                                       operation=1, permission_type=1)]),
            lambda r: r.filter_results[0].error_code, SECURITY_DISABLED)


@row(K.DESCRIBE_CONFIGS)  # ZkAdminManager.describeConfigs: the topic does not exist
def _describe_configs(w: Where) -> Any:
    R_ = API_SPECS[K.DESCRIBE_CONFIGS].request.DescribeConfigsResource
    return (w.other, K.DESCRIBE_CONFIGS, 4, dict(resources=[R_(resource_type=2, resource_name=missing(),
                                                               configuration_keys=None)],
                                                 include_synonyms=False, include_documentation=False),
            lambda r: r.results[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.ALTER_CONFIGS)  # ZkAdminManager.alterConfigs: the topic does not exist
def _alter_configs(w: Where) -> Any:
    R_ = API_SPECS[K.ALTER_CONFIGS].request.AlterConfigsResource
    return (w.other, K.ALTER_CONFIGS, 2, dict(validate_only=False, resources=[R_(resource_type=2, resource_name=missing(), configs=[
        R_.AlterableConfig(name="retention.ms", value="1000")])]),
        lambda r: r.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.INCREMENTAL_ALTER_CONFIGS)  # ZkAdminManager.incrementalAlterConfigs: the topic does not exist
def _incremental_alter_configs(w: Where) -> Any:
    R_ = API_SPECS[K.INCREMENTAL_ALTER_CONFIGS].request.AlterConfigsResource
    return (w.other, K.INCREMENTAL_ALTER_CONFIGS, 1, dict(validate_only=False, resources=[
        R_(resource_type=2, resource_name=missing(), configs=[R_.AlterableConfig(name="retention.ms", config_operation=0,
                                                                                value="1000")])]),
        lambda r: r.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION)


@row(K.DESCRIBE_LOG_DIRS)  # KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster refused
def _describe_log_dirs(w: Where) -> Any:
    return (w.secured, K.DESCRIBE_LOG_DIRS, 4, dict(topics=None), lambda r: r.error_code, CLUSTER_AUTHORIZATION_FAILED)


@row(K.ELECT_LEADERS)  # KafkaController.processReplicaLeaderElection on a broker that is not the controller
def _elect_leaders(w: Where) -> Any:
    T = API_SPECS[K.ELECT_LEADERS].request.TopicPartitions
    return (w.other, K.ELECT_LEADERS, 2, dict(election_type=0, timeout_ms=1000,
                                              topic_partitions=[T(topic=w.topic, partitions=[0])]),
            lambda r: r.replica_election_results[0].partition_result[0].error_code, NOT_CONTROLLER)


@row(K.ALTER_REPLICA_LOG_DIRS)  # KafkaApis.handleAlterReplicaLogDirsRequest: ALTER on the cluster refused, per partition
def _alter_replica_log_dirs(w: Where) -> Any:
    D = API_SPECS[K.ALTER_REPLICA_LOG_DIRS].request.AlterReplicaLogDir
    return (w.secured, K.ALTER_REPLICA_LOG_DIRS, 2, dict(dirs=[D(path="/nowhere", topics=[
        D.AlterReplicaLogDirTopic(name=w.topic, partitions=[0])])]),
        lambda r: r.results[0].partitions[0].error_code, CLUSTER_AUTHORIZATION_FAILED)


@row(K.DESCRIBE_CLIENT_QUOTAS)  # ZkAdminManager.describeClientQuotas: a custom entity type is UnsupportedVersion
def _describe_client_quotas(w: Where) -> Any:
    C = API_SPECS[K.DESCRIBE_CLIENT_QUOTAS].request.ComponentData
    return (w.other, K.DESCRIBE_CLIENT_QUOTAS, 1, dict(strict=False, components=[C(entity_type="planet", match_type=0,
                                                                                   match="mars")]),
            lambda r: r.error_code, UNSUPPORTED_VERSION)


@row(K.ALTER_CLIENT_QUOTAS)  # ZkAdminManager.alterClientQuotas: a quota key it does not know
def _alter_client_quotas(w: Where) -> Any:
    E = API_SPECS[K.ALTER_CLIENT_QUOTAS].request.EntryData
    return (w.other, K.ALTER_CLIENT_QUOTAS, 1, dict(validate_only=True, entries=[E(
        entity=[E.EntityData(entity_type="user", entity_name="u")],
        ops=[E.OpData(key="no.such.quota", value=1.0, remove=False)])]),
        lambda r: r.entries[0].error_code, INVALID_REQUEST)


@row(K.DESCRIBE_USER_SCRAM_CREDENTIALS)  # ZkAdminManager.describeUserScramCredentials: no such user
def _describe_scram(w: Where) -> Any:
    U = API_SPECS[K.DESCRIBE_USER_SCRAM_CREDENTIALS].request.UserName
    return (w.other, K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, dict(users=[U(name="nobody")]),
            lambda r: r.results[0].error_code, RESOURCE_NOT_FOUND)


@row(K.ALTER_USER_SCRAM_CREDENTIALS)  # ZkAdminManager.alterUserScramCredentials: deleting what is not there
def _alter_scram(w: Where) -> Any:
    D = API_SPECS[K.ALTER_USER_SCRAM_CREDENTIALS].request.ScramCredentialDeletion
    return (w.controller, K.ALTER_USER_SCRAM_CREDENTIALS, 0, dict(deletions=[D(name="nobody", mechanism=2)], upsertions=[]),
            lambda r: r.results[0].error_code, RESOURCE_NOT_FOUND)


@row(K.DESCRIBE_CLUSTER)  # AuthHelper.computeDescribeClusterResponse: a controller endpoint asked of a broker
def _describe_cluster(w: Where) -> Any:
    return (w.other, K.DESCRIBE_CLUSTER, 2, dict(include_cluster_authorized_operations=False, endpoint_type=2,
                                                 include_fenced_brokers=False),
            lambda r: r.error_code, MISMATCHED_ENDPOINT_TYPE)


@row(K.DESCRIBE_TOPIC_PARTITIONS)  # DescribeTopicPartitionsRequestHandler: a cursor outside the topics named
def _describe_topic_partitions(w: Where) -> Any:
    Q = API_SPECS[K.DESCRIBE_TOPIC_PARTITIONS].request
    return (w.other, K.DESCRIBE_TOPIC_PARTITIONS, 0, dict(topics=[Q.TopicRequest(name=w.topic)], response_partition_limit=10,
                                                          cursor=Q.Cursor(topic_name="zzz", partition_index=0)),
            lambda r: r.topics[0].error_code, INVALID_REQUEST)


def test_every_advertised_api_has_a_row() -> None:
    assert set(ROWS) == set(API_SPECS)


@pytest.mark.parametrize("key", sorted(ROWS), ids=lambda k: k.name)
def test_error_path(where: Where, key: ApiKey) -> None:
    address, api, version, fields, code_of, expected = ROWS[key](where)
    assert version == API_SPECS[api].max_version, f"{api.name}: test the highest version advertised"
    with RawConnection(address) as conn:
        if api == K.API_VERSIONS:
            # Kafka answers an invalid ApiVersions at its version with no versions listed, which
            # kafka-python cannot decode (it reads any error answer as v0): read the error code.
            conn.send_bytes(conn.encode(API_SPECS[api].request(version=version, **fields)))
            frame = conn.recv_frame()
            assert struct.unpack_from(">h", frame, 4)[0] == expected, frame.hex()
            return
        resp = ask(conn, api, version, **fields)
    assert code_of(resp) == expected, f"{api.name} v{version}: {resp}"
