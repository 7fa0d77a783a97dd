"""Traced ONNX graph templates kept on disk, so that a new engine process skips the trace.

A policy's graphs are traced once per model layout (onnx_weights.py), yet every engine process
traced them again: each run, each resume, each restart of a killed engine. A new engine's first
export took 0.76 s for the tiny model and 117 s for a Qwen2.5-0.5B-shaped one by tracing, 0.05 s and
4.7 s from this cache (AMD EPYC Zen 4, scripts/bench/onnx-graph-cache.py). A cache entry holds each
graph with its weight initializers empty and, per initializer, the state-dict tensor it holds.

An entry's key covers everything a trace depends on: the model layout (config, state-dict names,
shapes and dtypes, opset), the torch, transformers and onnx versions, and the bytes of the modules
that trace and template the graphs. An entry that cannot be read, or that does not fit the model it
is meant for, is traced again and replaced, with a warning naming it. Entries are written to a
temporary directory and renamed, so that concurrent engines never read half of one.
"""

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Dict, List, Tuple

import onnx
import torch
import transformers
from google.protobuf.message import DecodeError

log = logging.getLogger('thinkfl_engine')

SOURCES_FILE = 'sources.json'
# The modules whose code decides what a trace produces: a change to any of them is a new key.
TRACING_MODULES = ('onnx_export.py', 'onnx_decode.py', 'onnx_weights.py', 'onnx_graph_cache.py')

# A weight initializer's source: the state-dict name, and whether it holds the tensor transposed.
Source = Tuple[str, bool]
# One graph's template: the traced model with its weight initializers empty, and their sources by index.
Stored = Tuple[onnx.ModelProto, Dict[int, Source]]


def entry_key(layout: str) -> str:
    """The cache key of a layout (onnx_weights.layout_key) under this code and these library versions."""
    h = hashlib.sha256()
    h.update(json.dumps([layout, torch.__version__, transformers.__version__, onnx.__version__]).encode())
    here = Path(__file__).parent
    for name in TRACING_MODULES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:32]


def read_entry(entry: Path) -> Dict[str, Stored]:
    """The templates stored in `entry`; raises when it is missing or malformed."""
    listing = json.loads((entry / SOURCES_FILE).read_text())
    out: Dict[str, Stored] = {}
    for file, rows in listing.items():
        model = onnx.load(str(entry / file), load_external_data=False)
        inits = model.graph.initializer
        sources: Dict[int, Source] = {}
        for i, name, transposed in rows:
            if not 0 <= int(i) < len(inits) or inits[int(i)].HasField('raw_data'):
                raise ValueError(f'{file}: initializer {i} is not an empty weight slot')
            sources[int(i)] = (str(name), bool(transposed))
        out[file] = (model, sources)
    return out


def write_entry(entry: Path, templates: Dict[str, Stored]) -> None:
    """Stores the templates as `entry`, replacing what is there; another engine's concurrent copy may win."""
    tmp = entry.with_name(f'{entry.name}.tmp-{os.getpid()}')
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        listing: Dict[str, List[Tuple[int, str, bool]]] = {}
        for file, (model, sources) in templates.items():
            (tmp / file).write_bytes(model.SerializeToString())
            listing[file] = [(i, name, transposed) for i, (name, transposed) in sorted(sources.items())]
        (tmp / SOURCES_FILE).write_text(json.dumps(listing))
        shutil.rmtree(entry, ignore_errors=True)
        try:
            tmp.rename(entry)
        except OSError:
            if not (entry / SOURCES_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def store(cache_dir: Path, layout: str, templates: Dict[str, Stored]) -> None:
    """Writes the templates under the layout's key; a cache that cannot be written is only a warning."""
    entry = cache_dir / entry_key(layout)
    try:
        write_entry(entry, templates)
    except OSError as e:
        log.warning('onnx graph cache %s not written (%s): the next engine traces again', entry, e)


def lookup(cache_dir: Path, layout: str) -> Tuple[Path, Dict[str, Stored] | None]:
    """The layout's entry and its templates, or None when there is none or it cannot be read (warned)."""
    entry = cache_dir / entry_key(layout)
    if not (entry / SOURCES_FILE).is_file():
        return entry, None
    try:
        return entry, read_entry(entry)
    except (OSError, ValueError, KeyError, TypeError, DecodeError) as e:
        log.warning('onnx graph cache %s unreadable (%s: %s): tracing again', entry, type(e).__name__, e)
        return entry, None
