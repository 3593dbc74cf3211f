"""The user and client config maps: client quotas and SCRAM credentials, as Kafka keeps them in
``/config/users`` and ``/config/clients`` (a local file on a standalone broker). Keys are the
znodes' paths below ``/config`` (``users/<u>/clients/<c>``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.controller import quota

if TYPE_CHECKING:
    from headwater.server.authority import MetadataAuthority


class UserConfigs:
    def __init__(self, authority: MetadataAuthority, quotas: quota.MutationQuotas) -> None:
        self._authority = authority
        self._quotas = quotas
        self.configs: dict[str, dict[str, str]] = authority.initial_user_configs()
        self._configure()

    def _configure(self) -> None:
        rates = {}
        for path, values in self.configs.items():
            if quota.QUOTA_KEY in values:
                rates[quota.parse_entity_path(path)] = float(values[quota.QUOTA_KEY])
        self._quotas.configure(rates)

    async def refresh(self) -> None:
        """Re-read the maps after a change notification (another broker may have written them)."""
        loaded = await self._authority.load_user_configs()
        if loaded is not None:
            self.configs = loaded
            self._configure()

    async def save(self, updated: dict[str, dict[str, str]]) -> None:
        """Write the maps that changed (quotas, SCRAM credentials) and use them."""
        await self._authority.write_user_configs(self.configs, updated)
        self.configs = updated
        self._configure()
