"""Cost of the protocol codecs on the hot path: kafka-python 3 against kio, and our fetch writer.

Measures, per call, decoding a ProduceRequest v9 (one partition with a 1 MiB batch, and 100
partitions with 10 KiB each) and encoding a FetchResponse v12 with 1 MiB of records: with
kafka-python's schema classes, with kio, and with headwater's part-list writer (which does not
copy the records). Prints one JSON line; the README quotes it.

    .venv/bin/python benchmarks/codec.py
"""

from __future__ import annotations

import datetime
import io
import json
import timeit
import uuid

from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest

from headwater.protocol.fetch import BytesPart, FetchPartitionData, FetchTopicData, encode_fetch_response


def kp_produce_bytes(partitions: int, size: int) -> bytes:
    req = ProduceRequest[9]
    data = [req.TopicProduceData(name="t", partition_data=[
        req.TopicProduceData.PartitionProduceData(index=i, records=b"\x01" * size) for i in range(partitions)])]
    return bytes(req(transactional_id=None, acks=1, timeout_ms=1000, topic_data=data).encode())


def per_call_us(fn: object, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def main() -> None:
    from kio.schema.errors import ErrorCode as KioError
    from kio.schema.fetch.v12.response import FetchableTopicResponse, PartitionData
    from kio.schema.fetch.v12.response import FetchResponse as KioFetch
    from kio.schema.produce.v9.request import ProduceRequest as KioProduce
    from kio.serial import entity_reader, entity_writer

    read_kio_produce = entity_reader(KioProduce)
    write_kio_fetch = entity_writer(KioFetch)
    out: dict[str, object] = {"benchmark": "codec"}
    for label, parts, size in (("1x1MiB", 1, 1 << 20), ("100x10KiB", 100, 10 << 10)):
        raw = kp_produce_bytes(parts, size)
        out[f"produce_decode_{label}_us"] = {
            "kafka_python": round(per_call_us(lambda raw=raw: ProduceRequest.decode(raw, version=9), 200), 1),
            "kio": round(per_call_us(lambda raw=raw: read_kio_produce(raw, 0), 200), 1),
        }
    records = b"\x02" * (1 << 20)
    tid = uuid.uuid4()

    def kp_fetch() -> bytes:
        resp_cls = FetchResponse
        topic_cls = resp_cls.FetchableTopicResponse
        part_cls = topic_cls.PartitionData
        resp = FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=0, responses=[topic_cls(
            topic="t", partitions=[part_cls(partition_index=0, error_code=KioError.none, high_watermark=1, last_stable_offset=1,
                                            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                                            records=records)])])
        return bytes(resp.encode(version=12))

    def kio_fetch() -> bytes:
        resp = KioFetch(throttle_time=datetime.timedelta(0), error_code=KioError.none, session_id=0, responses=(
            FetchableTopicResponse(topic="t", partitions=(PartitionData(
                partition_index=0, error_code=KioError.none, high_watermark=1, last_stable_offset=1, log_start_offset=0,
                aborted_transactions=None, preferred_read_replica=-1, records=records),)),))
        buf = io.BytesIO()
        write_kio_fetch(buf, resp)
        return buf.getvalue()

    def hw_fetch() -> object:
        return encode_fetch_response(12, 1, [FetchTopicData("t", tid, [FetchPartitionData(0, 0, 1, 1, 0, [BytesPart(records)])])])

    out["fetch_encode_1MiB_us"] = {
        "kafka_python": round(per_call_us(kp_fetch, 200), 1),
        "kio": round(per_call_us(kio_fetch, 200), 1),
        "headwater_parts": round(per_call_us(hw_fetch, 2000), 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
