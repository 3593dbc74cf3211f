"""The partition-mutation quota (KIP-599): token buckets per quota entity, strict and permissive.

Rules (Kafka's ``ControllerMutationQuotaManager`` and ``TokenBucket``), with time passed in:

- A bucket holds at most ``burst = windows * window_seconds * rate`` tokens and starts full.
- Before each use it refills by ``rate * elapsed_seconds``, capped at the burst.
- Recording ``n`` mutations removes ``n`` tokens; tokens may go below zero.
- A bucket is *exceeded* only while its tokens are below zero, so one large request is admitted
  whole and the debt is paid by waiting: ``throttle_ms = round(-tokens / rate * 1000)``.
- Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): each topic checks first; a
  topic that arrives while the bucket is exceeded gets THROTTLING_QUOTA_EXCEEDED and consumes
  nothing; the other topics of the request go on.
- Permissive (older versions, auto-creation): everything is recorded and accepted; the response
  carries the throttle time and the broker mutes the connection for it.

The entity whose quota applies is found in Kafka's order, most specific first:
user+client, user+default client, user, default user+client, default user+default client,
default user, client, default client. Without any ``controller_mutation_rate`` configured the
quota is unbounded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from headwater.protocol.errors import ErrorCode, KafkaError

QUOTA_KEY = "controller_mutation_rate"
DEFAULT_ENTITY = None  # the <default> entity of a type
DEFAULT_WINDOWS = 11
DEFAULT_WINDOW_SECONDS = 1
MAX_THROTTLE_MS = 2**31 - 1  # throttle_time_ms is an int32 on the wire

# A quota entity: (user, client_id); each is a name, DEFAULT_ENTITY (<default>) or absent ("").
ABSENT = ""
Entity = tuple[str | None, str | None]


def resolution_order(user: str, client_id: str) -> list[Entity]:
    """Entities to look up for a request by ``user`` and ``client_id``, most specific first."""
    return [
        (user, client_id),
        (user, DEFAULT_ENTITY),
        (user, ABSENT),
        (DEFAULT_ENTITY, client_id),
        (DEFAULT_ENTITY, DEFAULT_ENTITY),
        (DEFAULT_ENTITY, ABSENT),
        (ABSENT, client_id),
        (ABSENT, DEFAULT_ENTITY),
    ]


def resolve(quotas: Mapping[Entity, float], user: str, client_id: str) -> tuple[Entity, float] | None:
    """The entity and rate that apply, or None when no quota covers this client (unbounded)."""
    for entity in resolution_order(user, client_id):
        rate = quotas.get(entity)
        if rate is not None:
            return entity, rate
    return None


@dataclass
class TokenBucket:
    rate: float  # mutations per second
    burst: float
    tokens: float
    last_ms: int | None = None

    @classmethod
    def full(cls, rate: float, windows: int, window_seconds: float) -> TokenBucket:
        burst = windows * window_seconds * rate
        return cls(rate=rate, burst=burst, tokens=burst)

    def refill(self, now_ms: int) -> None:
        # Overlapping requests carry their own arrival times; an older one must not move the clock
        # back, or the next refill would credit the same time twice.
        if self.last_ms is not None and now_ms <= self.last_ms:
            return
        if self.last_ms is not None:
            elapsed_s = (now_ms - self.last_ms) / 1000.0
            self.tokens = min(self.burst, self.tokens + self.rate * elapsed_s)
        self.last_ms = now_ms

    def exceeded(self, now_ms: int) -> bool:
        self.refill(now_ms)
        return self.tokens < 0

    def record(self, amount: float, now_ms: int) -> None:
        self.refill(now_ms)
        self.tokens = min(self.burst, self.tokens - amount)

    def throttle_ms(self, now_ms: int) -> int:
        self.refill(now_ms)
        if self.tokens >= 0:
            return 0
        if self.rate <= 0:
            return MAX_THROTTLE_MS  # a zero rate admits nothing more, ever
        # Half up, like Java's Math.round (Python's round() would round half to even).
        return min(MAX_THROTTLE_MS, math.floor(-self.tokens / self.rate * 1000 + 0.5))


class MutationQuotas:
    """All buckets of one broker. Quota configs come in whole; buckets keep their state across updates."""

    def __init__(self, windows: int = DEFAULT_WINDOWS, window_seconds: float = DEFAULT_WINDOW_SECONDS) -> None:
        self.windows = windows
        self.window_seconds = window_seconds
        self._quotas: dict[Entity, float] = {}
        self._buckets: dict[Entity, TokenBucket] = {}

    def configure(self, quotas: Mapping[Entity, float]) -> None:
        self._quotas = dict(quotas)
        for entity in list(self._buckets):
            rate = self._quotas.get(entity)
            if rate is None:
                del self._buckets[entity]
            elif rate != self._buckets[entity].rate:
                # A new rate keeps the debt (or credit) but not more than the new burst.
                old = self._buckets[entity]
                fresh = TokenBucket.full(rate, self.windows, self.window_seconds)
                fresh.tokens = min(fresh.burst, old.tokens)
                fresh.last_ms = old.last_ms
                self._buckets[entity] = fresh

    def bucket_for(self, user: str, client_id: str) -> tuple[Entity, TokenBucket] | None:
        found = resolve(self._quotas, user, client_id)
        if found is None:
            return None
        entity, rate = found
        bucket = self._buckets.get(entity)
        if bucket is None:
            bucket = self._buckets[entity] = TokenBucket.full(rate, self.windows, self.window_seconds)
        return entity, bucket

    def remaining_tokens(self, now_ms: int) -> dict[Entity, float]:
        out = {}
        for entity, bucket in self._buckets.items():
            bucket.refill(now_ms)
            out[entity] = bucket.tokens
        return out


class RequestQuota:
    """The quota of one request: check per topic, record, and the throttle time at the end."""

    def __init__(self, quotas: MutationQuotas, user: str, client_id: str, strict: bool, now_ms: int) -> None:
        found = quotas.bucket_for(user, client_id)
        self.bucket = found[1] if found else None
        self.strict = strict
        self.now_ms = now_ms
        self._throttle_ms = 0

    def try_consume(self, mutations: int) -> bool:
        """Strict: False (and nothing consumed) when the bucket is already exceeded. Permissive: always True."""
        if self.bucket is None or mutations <= 0:
            return True
        if self.strict and self.bucket.exceeded(self.now_ms):
            self._throttle_ms = max(self._throttle_ms, self.bucket.throttle_ms(self.now_ms))
            return False
        self.bucket.record(mutations, self.now_ms)
        if not self.strict:
            self._throttle_ms = max(self._throttle_ms, self.bucket.throttle_ms(self.now_ms))
        return True

    @property
    def throttle_ms(self) -> int:
        """What the response reports: for strict, only when a topic was refused (Kafka's rule)."""
        return self._throttle_ms


def parse_rate(value: float | str) -> float:
    """A configured rate must be a finite, non-negative number."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{QUOTA_KEY} must be a number, got {value!r}") from None
    if math.isnan(rate) or math.isinf(rate) or rate < 0:
        raise ValueError(f"{QUOTA_KEY} must be a non-negative finite number, got {value!r}")
    return rate


# --- quota configuration: entities as clients name them -------------------------------------------

USER = "user"
CLIENT_ID = "client-id"
SUPPORTED_KEYS = (QUOTA_KEY,)
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def parse_entity(components: list[tuple[str, str | None]]) -> Entity:
    """An entity from (entity_type, name) pairs, a name of None meaning <default>. Raises ValueError."""
    if not components:
        raise ValueError("Invalid empty client quota entity")
    user: str | None = ABSENT
    client: str | None = ABSENT
    seen: set[str] = set()
    for entity_type, name in components:
        if entity_type in seen:
            raise ValueError(f"Duplicate {entity_type} in client quota entity")
        seen.add(entity_type)
        if name == "":
            raise ValueError(f"Empty {entity_type} name in client quota entity; use the default entity instead")
        if entity_type == USER:
            user = name
        elif entity_type == CLIENT_ID:
            client = name
        else:
            raise ValueError(f"Unsupported client quota entity type: {entity_type} (supported: {USER}, {CLIENT_ID})")
    return user, client


def entity_components(entity: Entity) -> list[tuple[str, str | None]]:
    user, client = entity
    out: list[tuple[str, str | None]] = []
    if user != ABSENT:
        out.append((USER, user))
    if client != ABSENT:
        out.append((CLIENT_ID, client))
    return out


IP = "ip"  # a filter may name it; this broker keeps no IP quotas


def check_filter(filters: list[tuple[str, int, str | None]]) -> None:
    """Refuse a DescribeClientQuotas filter as ZkAdminManager.describeClientQuotas does."""
    seen: set[str] = set()
    for entity_type, match_type, _match in filters:
        if entity_type == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{entity_type}' not supported")
        if entity_type in seen:
            name = {USER: "user", CLIENT_ID: "client", IP: "ip"}[entity_type]
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate {name} filter component entity type")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        seen.add(entity_type)
    if IP in seen and seen & {USER, CLIENT_ID}:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component "
                                                    "should not be used with user or clientId filter component.")


def entity_matches(entity: Entity, filters: list[tuple[str, int, str | None]], strict: bool) -> bool:
    """DescribeClientQuotas filtering: each component must match; strict means no other components."""
    parts = dict(entity_components(entity))
    for entity_type, match_type, match in filters:
        if entity_type not in (USER, CLIENT_ID):
            raise ValueError(f"Unsupported client quota entity type: {entity_type}")
        if entity_type not in parts:
            return False
        value = parts[entity_type]
        if match_type == MATCH_EXACT and value != match:
            return False
        if match_type == MATCH_DEFAULT and value is not DEFAULT_ENTITY:
            return False
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise ValueError(f"Unknown match type {match_type}")
    return not strict or set(parts) == {f[0] for f in filters}


def apply_ops(current: Mapping[str, float], ops: list[tuple[str, float, bool]]) -> dict[str, float]:
    """New key -> value map of one entity after AlterClientQuotas ops. Raises ValueError on bad input."""
    out = dict(current)
    keys = [k for k, _v, _r in ops]
    if len(set(keys)) != len(keys):
        raise ValueError("Duplicate quota key in the request")
    for key, value, remove in ops:
        if key not in SUPPORTED_KEYS:
            raise ValueError(f"Invalid quota key {key}: supported keys are {', '.join(SUPPORTED_KEYS)}")
        if remove:
            out.pop(key, None)
        else:
            out[key] = parse_rate(value)
    return out


def entity_path(entity: Entity) -> str:
    """Kafka's config path of an entity: ``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``.

    Names are URL-encoded as Kafka's ``Sanitizer`` does; ``<default>`` names the default entity.
    """
    user, client = entity
    parts = []
    if user != ABSENT:
        parts += ["users", "<default>" if user is DEFAULT_ENTITY else quote(user, safe="")]
    if client != ABSENT:
        parts += ["clients", "<default>" if client is DEFAULT_ENTITY else quote(client, safe="")]
    if not parts:
        raise ValueError("empty quota entity")
    return "/".join(parts)


def parse_entity_path(path: str) -> Entity:
    parts = path.strip("/").split("/")
    user: str | None = ABSENT
    client: str | None = ABSENT
    if len(parts) not in (2, 4):
        raise ValueError(f"bad quota entity path {path!r}")
    for kind, name in zip(parts[::2], parts[1::2], strict=True):
        value = DEFAULT_ENTITY if name == "<default>" else unquote(name)
        if kind == "users" and user == ABSENT and client == ABSENT:
            user = value
        elif kind == "clients" and client == ABSENT:
            client = value
        else:
            raise ValueError(f"bad quota entity path {path!r}")
    return user, client
