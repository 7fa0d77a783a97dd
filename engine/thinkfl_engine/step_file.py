"""Token-batch files written by the control plane (packages/trainer-ctl/src/queue/step-file.ts).

Safetensors layout: 8-byte little-endian header length, a JSON header, raw little-endian
buffers. The file is a sequence of blocks (one per group for a step); block k has tensors
b<k>.offsets I64 [n+1], b<k>.ids I32 [t], b<k>.mask U8 [t], and optionally b<k>.logprobs
F32 [t] and b<k>.advantages F64 [n]. Its checksum is the SHA-256 of the SHA-256 digests of the
header and of each block, in file order. The file is checked against the reference the train
job carries, then memory-mapped with numpy (no JSON of the data; a row is read when used), so a
torn or replaced file is refused before any of it is used.
"""

import hashlib
import json
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

FORMAT = 'thinkfl-token-batch/1'
_DTYPES = {'I64': '<i8', 'I32': '<i4', 'U8': 'u1', 'F32': '<f4', 'F64': '<f8'}
_CHUNK = 16 << 20
_BLOCK = re.compile(r'^b(\d+)\.(\w+)$')


class StepFileError(ValueError):
    pass


def _read_header(path: str) -> Tuple[int, bytes, Dict[str, Any]]:
    with open(path, 'rb') as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise StepFileError(f'{path}: no header (torn or replaced file)')
        n = int.from_bytes(raw, 'little')
        head = f.read(n)
    if len(head) != n:
        raise StepFileError(f'{path}: header of {n} bytes cut short (torn or replaced file)')
    try:
        return n, raw + head, json.loads(head)
    except ValueError as e:
        raise StepFileError(f'{path}: unreadable header (torn or replaced file)') from e


def _blocks(header: Dict[str, Any]) -> Dict[int, Dict[str, Any]]:
    out: Dict[int, Dict[str, Any]] = {}
    for name, t in header.items():
        m = _BLOCK.match(name)
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = t
    return dict(sorted(out.items()))


def digest(path: str) -> Tuple[str, int]:
    """The file's checksum as the writer defines it, and its size; memory stays bounded."""
    n, head, header = _read_header(path)
    digests = [hashlib.sha256(head).digest()]
    end = 0
    with open(path, 'rb') as f:
        for cols in _blocks(header).values():
            lo = min(t['data_offsets'][0] for t in cols.values())
            hi = max(t['data_offsets'][1] for t in cols.values())
            h = hashlib.sha256()
            f.seek(8 + n + lo)
            left = hi - lo
            while left > 0:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
            digests.append(h.digest())
            end = max(end, hi)
        size = f.seek(0, 2)
    if size != 8 + n + end:
        raise StepFileError(f'{path}: {size} bytes, its header describes {8 + n + end} (torn or replaced file)')
    return hashlib.sha256(b''.join(digests)).hexdigest(), size


class TokenBatch:
    """A verified token-batch file, memory-mapped; rows are read on demand."""

    def __init__(self, ref: Dict[str, Any]):
        path = str(ref['path'])
        try:
            sha, size = digest(path)
        except OSError as e:
            raise StepFileError(f'{path}: cannot read ({e})') from e
        if sha != ref['sha256'] or size != int(ref['bytes']):
            raise StepFileError(
                f'{path}: {size} bytes with sha256 {sha}; the job says {ref["bytes"]} bytes with '
                f'sha256 {ref["sha256"]} (torn or replaced file)'
            )
        self.path, self.sha256, self.bytes = path, sha, size
        n, _, header = _read_header(path)
        meta = header.get('__metadata__') or {}
        if meta.get('format') != FORMAT:
            raise StepFileError(f'{path}: format {meta.get("format")!r}, expected {FORMAT!r}')

        def mapped(t: Dict[str, Any]) -> np.ndarray:
            start, end = t['data_offsets']
            count = int(np.prod(t['shape']))
            if end == start:
                return np.zeros(0, _DTYPES[t['dtype']])
            return np.memmap(path, dtype=_DTYPES[t['dtype']], mode='r', offset=8 + n + start, shape=(count,))

        self.blocks: List[Dict[str, np.ndarray]] = [
            {c: mapped(t) for c, t in cols.items()} for cols in _blocks(header).values()
        ]
        # Global row i -> (block, row within the block).
        self.index: List[Tuple[int, int]] = [
            (k, i) for k, b in enumerate(self.blocks) for i in range(len(b['offsets']) - 1)
        ]
        self.rows = len(self.index)
        self.tokens = sum(len(b['ids']) for b in self.blocks)

    def span(self, row_range: Optional[List[int]]) -> range:
        lo, hi = (0, self.rows) if row_range is None else (int(row_range[0]), int(row_range[1]))
        if not 0 <= lo < hi <= self.rows:
            raise StepFileError(f"{self.path}: rows [{lo}, {hi}) outside the file's {self.rows} rows")
        return range(lo, hi)

    def has(self, name: str) -> bool:
        return all(name in b for b in self.blocks)

    def row(self, name: str, i: int) -> np.ndarray:
        k, j = self.index[i]
        b = self.blocks[k]
        return b[name][int(b['offsets'][j]) : int(b['offsets'][j + 1])]

    def advantage(self, i: int) -> float:
        k, j = self.index[i]
        return float(self.blocks[k]['advantages'][j])

    def chunks(self, *names: str, step: int = _CHUNK // 8) -> Iterator[Tuple[np.ndarray, ...]]:
        """Aligned chunks of token columns, block by block (memory stays bounded)."""
        for b in self.blocks:
            for start in range(0, len(b[names[0]]), step):
                yield tuple(b[c][start : start + step] for c in names)


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
        out['advantages'] = [b.advantage(i) for i in rows]
    if b.has('logprobs'):
        out['old'] = [b.row('logprobs', i).astype(np.float64).tolist() for i in rows]
    return out


def batch_stats(ref: Dict[str, Any]) -> Dict[str, Any]:
    """Checks a token-batch file and sums its columns in bounded chunks (the data path, no training)."""
    b = TokenBatch(ref)
    out: Dict[str, Any] = {
        'sha256': b.sha256,
        'bytes': b.bytes,
        'rows': b.rows,
        'tokens': b.tokens,
        'ids_sum': sum(int(ids.sum(dtype=np.int64)) for (ids,) in b.chunks('ids')),
        'masked_tokens': sum(int(m.sum(dtype=np.int64)) for (m,) in b.chunks('mask')),
        'max_row_tokens': max(int(np.diff(blk['offsets']).max()) for blk in b.blocks),
    }
    if b.has('logprobs'):
        out['masked_logprob_sum'] = sum(
            float(np.dot(lp.astype(np.float64), m.astype(np.float64))) for lp, m in b.chunks('logprobs', 'mask')
        )
    if b.has('advantages'):
        out['advantage_sum'] = float(sum(np.asarray(blk['advantages'], dtype=np.float64).sum() for blk in b.blocks))
    return out
