"""Where a single broker keeps its cluster image: one JSON file, replaced atomically.

This is the seam the ZooKeeper-backed controller plugs into: the broker asks the store for the
image and hands it new images; it does not care where they live.
"""

from __future__ import annotations

import json
from pathlib import Path

from headwater.metadata.image import BrokerInfo, ClusterImage, image_from_json, image_to_json, new_cluster_id
from headwater.storage.files import write_atomic

FILE_NAME = "headwater-metadata.json"


class LocalMetadataStore:
    def __init__(self, directory: Path, broker: BrokerInfo) -> None:
        self._path = directory / FILE_NAME
        self._broker = broker

    def load(self) -> ClusterImage:
        brokers = {self._broker.broker_id: self._broker}
        if self._path.exists():
            return image_from_json(self._path.read_text(), self._broker.broker_id, brokers)
        image = ClusterImage(new_cluster_id(), self._broker.broker_id, brokers, {})
        self.save(image)
        return image

    def save(self, image: ClusterImage) -> None:
        write_atomic(self._path, image_to_json(image).encode())


QUOTAS_FILE_NAME = "headwater-quotas.json"
BROKER_CONFIGS_FILE_NAME = "headwater-broker-configs.json"


class LocalQuotaStore:
    """Client quotas of a single broker: ``{"users/<u>/clients/<c>": {"controller_mutation_rate": "5"}}``.

    The keys are the paths of Kafka's ``/config`` znodes, so the ZooKeeper store holds the same
    documents under the same names.
    """

    def __init__(self, directory: Path, file_name: str = QUOTAS_FILE_NAME) -> None:
        self._path = directory / file_name

    def load(self) -> dict[str, dict[str, str]]:
        if not self._path.exists():
            return {}
        doc = json.loads(self._path.read_text())
        return {str(k): {str(kk): str(vv) for kk, vv in v.items()} for k, v in doc.items()}

    def save(self, quotas: dict[str, dict[str, str]]) -> None:
        write_atomic(self._path, json.dumps(quotas, indent=1, sort_keys=True).encode())


