"""The turn log's packed records: a zlib stream any reader decompresses, old rows included."""

from __future__ import annotations

import json
import zlib

from promptweave.store.turn_log_sqlite import pack_record, unpack_record


def test_a_packed_record_is_a_zlib_stream_of_its_compact_json() -> None:
    record = {"text": "今天好冷", "decision": {"action": "pass"}}
    blob = pack_record(record)
    assert zlib.decompress(blob) == json.dumps(
        record, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
    assert unpack_record(blob) == record


def test_a_long_record_round_trips_and_a_row_written_with_zlib_defaults_still_reads() -> None:
    record = {
        "messages": [{"role": "user", "text": f"第{i}条：" + "火锅" * (i % 50)} for i in range(400)]
    }
    assert len(json.dumps(record, ensure_ascii=False)) > 2**14  # longer than the window
    assert unpack_record(pack_record(record)) == record
    older = zlib.compress(json.dumps(record, ensure_ascii=False).encode("utf-8"), 6)
    assert unpack_record(older) == record
