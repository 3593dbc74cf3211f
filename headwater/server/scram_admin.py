"""SCRAM credentials on the broker: where they live and the two admin APIs over them.

They live where Kafka keeps them, in each user's config map (``/config/users/<user>`` in a
cluster, the local quota/config file on a standalone broker) beside the user's quotas, under the
mechanism's name. The broker already holds those maps (``UserConfigs``) and re-reads them
on every change notification, so a credential altered through any broker is usable on all of them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from headwater.controller import quota
from headwater.protocol.errors import ErrorCode
from headwater.security import scram
from headwater.security.acl import AclOperation

if TYPE_CHECKING:
    from headwater.protocol.apis import Request
    from headwater.server.context import BrokerContext

log = logging.getLogger(__name__)


def user_path(user: str) -> str:
    return quota.entity_path((user, quota.ABSENT))


def is_credential_key(key: str) -> bool:
    return key in scram.MECHANISMS


def credentials(configs: dict[str, dict[str, str]]) -> scram.UserCredentials:
    """Every user's credentials (mechanism -> Kafka's string) from the users' config maps."""
    out: scram.UserCredentials = {}
    for path, values in configs.items():
        try:
            user, client = quota.parse_entity_path(path)
        except ValueError:
            continue
        if client != quota.ABSENT or not isinstance(user, str) or user == quota.ABSENT:
            continue
        creds = {k: v for k, v in values.items() if is_credential_key(k)}
        if creds:
            out[user] = creds
    return out


def lookup(broker: BrokerContext, mechanism: str, user: str) -> scram.ScramCredential | None:
    text = broker.user_configs.configs.get(user_path(user), {}).get(mechanism)
    if text is None:
        return None
    try:
        return scram.ScramCredential.from_config(text)
    except ValueError as exc:
        log.warning("unreadable %s credential of user %r: %s", mechanism, user, exc)
        return None


def _infos(info_cls: Any, creds: dict[str, str]) -> list[Any]:
    out = []
    for mechanism, text in sorted(creds.items()):
        try:
            iterations = scram.ScramCredential.from_config(text).iterations
        except ValueError as exc:  # unreadable (written by hand?): not usable for login either
            log.warning("unreadable %s credential: %s", mechanism, exc)
            continue
        out.append(info_cls(mechanism=scram.MECHANISM_IDS[mechanism], iterations=iterations))
    return out


def describe(broker: BrokerContext, req: Request) -> Any:
    result_cls = req.spec.response.DescribeUserScramCredentialsResult
    info_cls = result_cls.CredentialInfo
    if not broker.authz.cluster(req, AclOperation.DESCRIBE):
        return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message="Authorization failed.", results=[])
    known = credentials(broker.user_configs.configs)
    wanted = [u.name for u in req.body.users] if req.body.users else None
    results = []
    if wanted is None:
        for user in sorted(known):
            results.append(result_cls(user=user, error_code=0, error_message=None,
                                      credential_infos=_infos(info_cls, known[user])))
    else:
        duplicates = {u for u in wanted if wanted.count(u) > 1}
        for user in dict.fromkeys(wanted):
            if user in duplicates:
                results.append(result_cls(user=user, error_code=scram.DUPLICATE_RESOURCE, credential_infos=[],
                                          error_message=f"Cannot describe SCRAM credentials for the same user twice "
                                                        f"in a single request: {user}"))
            elif user not in known:
                results.append(result_cls(user=user, error_code=scram.RESOURCE_NOT_FOUND, credential_infos=[],
                                          error_message=f"Attempt to describe a user credential that does not exist: {user}"))
            else:
                results.append(result_cls(user=user, error_code=0, error_message=None,
                                          credential_infos=_infos(info_cls, known[user])))
    return req.response(throttle_time_ms=0, error_code=0, error_message=None, results=results)


async def alter(broker: BrokerContext, req: Request) -> Any:
    body = req.body
    if not broker.authz.cluster(req, AclOperation.ALTER):
        # Refused as a whole (Kafka's rule): every user named gets CLUSTER_AUTHORIZATION_FAILED, nothing changes.
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return req.response(throttle_time_ms=0, results=[req.spec.response.AlterUserScramCredentialsResult(
            user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            for u in users])
    deletions = [scram.Deletion(d.name, d.mechanism) for d in body.deletions]
    upsertions = [scram.Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in body.upsertions]
    results, changed = scram.plan_alterations(credentials(broker.user_configs.configs), deletions, upsertions)
    if changed:
        updated = dict(broker.user_configs.configs)
        for user, creds in changed.items():
            path = user_path(user)
            values = {k: v for k, v in updated.get(path, {}).items() if not is_credential_key(k)}
            values.update(creds)
            if values:
                updated[path] = values
            else:
                updated.pop(path, None)
        await broker.user_configs.save(updated)
    result_cls = req.spec.response.AlterUserScramCredentialsResult
    return req.response(throttle_time_ms=0, results=[
        result_cls(user=r.user, error_code=r.error, error_message=r.message) for r in results])
