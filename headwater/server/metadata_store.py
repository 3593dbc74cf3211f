"""Where a single broker keeps its cluster image: one JSON file, replaced atomically.

This is the seam the ZooKeeper-backed controller plugs into: the broker asks the store for the
image and hands it new images; it does not care where they live.
"""

from __future__ import annotations

import os
from pathlib import Path

from headwater.metadata.image import BrokerInfo, ClusterImage, image_from_json, image_to_json, new_cluster_id

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
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(image_to_json(image))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
