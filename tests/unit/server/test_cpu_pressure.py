"""Reading Linux PSI's CPU line (format from the kernel's Documentation/accounting/psi.rst)."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.server.cpu_pressure import CpuPressure, parse_some_total

SAMPLE = (b"some avg10=0.00 avg60=0.88 avg300=11.83 total=9164155009\n"
          b"full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def test_the_some_lines_total_in_microseconds() -> None:
    assert parse_some_total(SAMPLE) == 9164155009


def test_text_without_a_some_line_is_refused() -> None:
    with pytest.raises(ValueError, match="no 'some"):
        parse_some_total(b"full avg10=0.00 total=5\n")


def test_reads_again_from_the_start_each_time(tmp_path: Path) -> None:
    psi = tmp_path / "cpu"
    psi.write_bytes(SAMPLE)
    reader = CpuPressure(str(psi))
    assert reader.waited_us() == 9164155009
    psi.write_bytes(SAMPLE.replace(b"9164155009", b"9164156009"))
    assert reader.waited_us() == 9164156009
    reader.close()


def test_no_file_means_no_reading_and_no_retry(tmp_path: Path) -> None:
    reader = CpuPressure(str(tmp_path / "absent"))
    assert reader.waited_us() is None
    (tmp_path / "absent").write_bytes(SAMPLE)
    assert reader.waited_us() is None  # the first failure is final: no open() per fetch
