"""torch.save that reports a failed write as the OSError it was.

Saving to a path, torch reports a disk that filled up mid-file as "RuntimeError: [enforce fail at
inline_container.cc] . unexpected pos N vs M", which names neither the cause nor the file; the
train worker can only tell a full or read-only disk (stop the run, resume once fixed) from a bug
by the errno. So the bytes go through a Python file whose write error is kept and raised instead.
"""

from pathlib import Path
from typing import Any, BinaryIO, Optional

import torch


class _Writes:
    """A file for torch.save that remembers the OSError of a failed write (torch turns it into a RuntimeError)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.error: Optional[OSError] = None

    def write(self, data: bytes) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def save(obj: Any, path: Path) -> None:
    with open(path, 'wb') as f:
        out = _Writes(f)
        try:
            torch.save(obj, out)
        except RuntimeError as e:
            if out.error is not None:
                raise out.error from e
            raise
