"""Token-batch files written by the control plane (packages/trainer-ctl/src/queue/step-file.ts).

Safetensors layout: 8-byte little-endian header length, a JSON header, raw little-endian
buffers. Columns: offsets I64 [B+1], ids I32 [T], mask U8 [T], optional logprobs F32 [T] and
advantages F64 [B]. The file is memory-mapped with numpy (no JSON of the data, nothing copied
until a row is used) after its SHA-256 is checked against the reference the train job
carries, so a torn or replaced file is refused before any of it is used.
"""
import hashlib
import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

FORMAT = 'thinkfl-token-batch/1'
_DTYPES = {'I64': '<i8', 'I32': '<i4', 'U8': 'u1', 'F32': '<f4', 'F64': '<f8'}
_CHUNK = 16 << 20


class StepFileError(ValueError):
    pass


def file_sha256(path: str) -> Tuple[str, int]:
    """SHA-256 and size of a whole file, read in chunks (memory stays bounded)."""
    h = hashlib.sha256()
    size = 0
    with open(path, 'rb') as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


class TokenBatch:
    """A verified token-batch file, memory-mapped; rows are read on demand."""

    def __init__(self, ref: Dict[str, Any]):
        path = str(ref['path'])
        try:
            sha, size = file_sha256(path)
        except OSError as e:
            raise StepFileError(f'{path}: cannot read ({e})') from e
        if sha != ref['sha256'] or ('bytes' in ref and size != int(ref['bytes'])):
            raise StepFileError(f"{path}: {size} bytes with sha256 {sha}; the job says {ref.get('bytes')} bytes with "
                                f"sha256 {ref['sha256']} (torn or replaced file)")
        self.path, self.sha256, self.bytes = path, sha, size
        with open(path, 'rb') as f:
            n = int.from_bytes(f.read(8), 'little')
            header = json.loads(f.read(n))
        meta = header.pop('__metadata__', {}) or {}
        if meta.get('format') != FORMAT:
            raise StepFileError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        self.metadata: Dict[str, str] = meta
        self.columns: Dict[str, np.ndarray] = {}
        for name, t in header.items():
            start, end = t['data_offsets']
            count = int(np.prod(t['shape'])) if t['shape'] else 1
            self.columns[name] = np.memmap(path, dtype=_DTYPES[t['dtype']], mode='r', offset=8 + n + start,
                                           shape=(count,)) if end > start else np.zeros(0, _DTYPES[t['dtype']])
        self.offsets = np.asarray(self.columns['offsets'], dtype=np.int64)
        self.rows = len(self.offsets) - 1

    def span(self, row_range: Optional[List[int]]) -> range:
        lo, hi = (0, self.rows) if row_range is None else (int(row_range[0]), int(row_range[1]))
        if not 0 <= lo < hi <= self.rows:
            raise StepFileError(f'{self.path}: rows [{lo}, {hi}) outside the file\'s {self.rows} rows')
        return range(lo, hi)

    def row(self, name: str, i: int) -> np.ndarray:
        return self.columns[name][self.offsets[i]:self.offsets[i + 1]]

    def has(self, name: str) -> bool:
        return name in self.columns

    def iter_tokens(self, name: str, step: int = _CHUNK // 8) -> Iterator[np.ndarray]:
        """A whole column in chunks of `step` values (memory stays bounded)."""
        col = self.columns[name]
        for start in range(0, len(col), step):
            yield col[start:start + step]


def step_args(args: Dict[str, Any]) -> Dict[str, Any]:
    """A step request whose `batch` names a token-batch file, as the inline arrays the trainer takes."""
    ref = args.get('batch')
    if ref is None:
        return args
    b = TokenBatch(ref)
    rows = b.span(ref.get('row_range'))
    out = {k: v for k, v in args.items() if k != 'batch'}
    out['input_ids'] = [b.row('ids', i).tolist() for i in rows]
    out['mask'] = [b.row('mask', i).tolist() for i in rows]
    if b.has('advantages'):
        out['advantages'] = [float(b.columns['advantages'][i]) for i in rows]
    if b.has('logprobs'):
        out['old'] = [b.row('logprobs', i).astype(np.float64).tolist() for i in rows]
    return out


def batch_stats(ref: Dict[str, Any]) -> Dict[str, Any]:
    """Checks a token-batch file and sums its columns in bounded chunks (the data path, no training)."""
    b = TokenBatch(ref)
    ids_sum = sum(int(c.sum(dtype=np.int64)) for c in b.iter_tokens('ids'))
    masked = sum(int(c.sum(dtype=np.int64)) for c in b.iter_tokens('mask'))
    out: Dict[str, Any] = {'sha256': b.sha256, 'bytes': b.bytes, 'rows': b.rows, 'tokens': int(b.offsets[-1]),
                           'ids_sum': ids_sum, 'masked_tokens': masked,
                           'max_row_tokens': int(np.diff(b.offsets).max())}
    if b.has('logprobs'):
        total = 0.0
        for lp, m in zip(b.iter_tokens('logprobs'), b.iter_tokens('mask')):
            total += float(np.dot(lp.astype(np.float64), m.astype(np.float64)))
        out['masked_logprob_sum'] = total
    if b.has('advantages'):
        out['advantage_sum'] = float(np.asarray(b.columns['advantages'], dtype=np.float64).sum())
    return out
