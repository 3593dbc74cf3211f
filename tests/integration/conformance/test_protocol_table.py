"""docs/protocol.md's version table is what a broker answers in ApiVersions, and its Kafka 4.x
column is what Kafka's own message definitions (the JSON schemas kafka-python 3.0.12 ships) say:
``validVersions``, less a latest version marked unstable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import kafka.protocol.schemas as kafka_schemas
from hw_support import RawConnection
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from headwater.admin.local import BrokerProcess

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")


def table() -> dict[int, tuple[str, str, str, str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line.strip())
        if m:
            rows[int(m[1])] = (m[2], m[3].strip(), m[4].strip(), m[5].strip())
    return rows


def kafka_4x_ranges() -> dict[int, str]:
    out = {}
    for path in (Path(kafka_schemas.__file__).parent / "resources").glob("*Request.json"):
        schema = json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))
        lo, _, hi = schema["validVersions"].partition("-")
        top = int(hi or lo) - (1 if schema.get("latestVersionUnstable") else 0)
        out[schema["apiKey"]] = f"{int(lo)}-{top}"
    return out


def test_the_table_is_what_api_versions_answers(broker: BrokerProcess) -> None:
    with RawConnection(broker.bootstrap) as conn:
        resp = conn.request(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"),
                            ApiVersionsResponse, 3)
    answered = {k.api_key: f"{k.min_version}-{k.max_version}" for k in resp.api_keys}
    rows = table()
    assert {key: row[3] for key, row in rows.items()} == answered


def test_the_kafka_4x_column_is_kafkas_message_definitions() -> None:
    ranges = kafka_4x_ranges()
    for key, (name, _k39, k4x, ours) in table().items():
        if key in ranges:
            assert k4x == ranges[key], f"{name}: {k4x} in the table, {ranges[key]} in the schema"
            # Never a version Kafka does not define.
            assert int(ours.split("-")[1]) <= int(ranges[key].split("-")[1]), name
        else:
            assert k4x.startswith("—"), f"{name}: no Kafka 4.x schema, yet the table says {k4x}"
