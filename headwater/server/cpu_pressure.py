"""The host's CPU pressure: how long, in all, some runnable task has waited for a CPU (Linux PSI,
``/proc/pressure/cpu``, the "some" line's ``total`` in µs). None where there is no such file or the
kernel does not account it (PSI off at boot answers the read with an error)."""

from __future__ import annotations

import os

PSI_CPU = "/proc/pressure/cpu"


class CpuPressure:
    """Reads the cumulative "some" waiting time, keeping the file open between reads."""

    def __init__(self, path: str = PSI_CPU) -> None:
        self._path = path
        self._fd: int | None = None
        self._failed = False

    def waited_us(self) -> int | None:
        if self._failed:
            return None
        try:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_RDONLY)
            text = os.pread(self._fd, 256, 0)
            return parse_some_total(text)
        except (OSError, ValueError):
            self.close()
            self._failed = True
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def parse_some_total(text: bytes) -> int:
    """``total`` of the "some" line of a PSI file (ValueError if there is none)."""
    for line in text.splitlines():
        if line.startswith(b"some "):
            for field in line.split()[1:]:
                if field.startswith(b"total="):
                    return int(field[6:])
    raise ValueError(f"no 'some ... total=' line in {text[:80]!r}")
