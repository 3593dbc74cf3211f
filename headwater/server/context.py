"""What a request handler may use of the broker it runs in.

The handlers in ``headwater/server/apis/`` (and the group, cluster and topic-creation shells) take a
``BrokerContext`` rather than the ``Broker``: the broker implements it, and a test can hand a
handler family something smaller. Whatever differs between a standalone broker and a member of a
ZooKeeper cluster sits behind ``authority`` (``headwater/server/authority.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from headwater.controller import quota
    from headwater.metadata.config_types import ConfigSource
    from headwater.metadata.image import BrokerInfo, ClusterImage, TopicImage
    from headwater.protocol.apis import Request
    from headwater.server.authn import Authenticator
    from headwater.server.authority import MetadataAuthority
    from headwater.server.authz import Authz
    from headwater.server.config import BrokerConfig
    from headwater.server.connection import ConnectionQuotas
    from headwater.server.groups import GroupShell
    from headwater.server.producer_ids import ProducerIds
    from headwater.server.replica_manager import Hosted, ReplicaManager
    from headwater.server.topic_creation import TopicCreator
    from headwater.server.transactions import TxnShell
    from headwater.server.user_configs import UserConfigs
    from headwater.storage import LogConfig, LogManager

# Without authentication every client is Kafka's anonymous principal, which user quotas (and the
# <default> user) apply to.
ANONYMOUS_USER = "ANONYMOUS"


class BrokerContext(Protocol):
    config: BrokerConfig
    info: BrokerInfo
    logs: LogManager
    replicas: ReplicaManager
    authz: Authz
    authn: Authenticator
    quotas: quota.MutationQuotas
    user_configs: UserConfigs
    authority: MetadataAuthority
    topic_creator: TopicCreator
    groups: GroupShell
    transactions: TxnShell
    producer_ids: ProducerIds
    connection_quotas: ConnectionQuotas

    @property
    def image(self) -> ClusterImage:
        """This broker's view of the cluster."""
        ...

    def publish_image(self, image: ClusterImage) -> None:
        """Make ``image`` this broker's view (the authority's only way to change it)."""

    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Hosted:
        """The partition, if this broker leads it; else raises the error a client expects."""
        ...

    def log_config(self, topic: TopicImage) -> LogConfig: ...

    def effective_topic_config(self, overrides: Mapping[str, str]) -> dict[str, tuple[str, ConfigSource]]:
        """Every topic config's value and source for a topic with these overrides, on this broker."""
        ...

    def broker_address(self, broker_id: int) -> tuple[str, int] | None: ...

    def client_brokers(self) -> list[tuple[BrokerInfo, str, int]]: ...

    def request_quota(self, req: Request, strict: bool) -> quota.RequestQuota: ...

    async def await_leaders(self, partitions: dict[str, set[int]], timeout_s: float) -> set[str]: ...

    async def refresh_log_configs(self) -> None: ...

    async def refresh_broker_configs(self) -> None: ...
