"""A policy's ONNX graphs, traced once per model layout; each later export writes only new weights.

A policy update changes weight values, not the graph, yet torch.onnx.export traces the model
again each time (2.6 s for the tiny model's two graphs, minutes for a 0.5B one). GraphTemplate
keeps one traced graph with its weights cleared and, per initializer, the state-dict tensor it
holds; PolicyGraphs traces the templates of a layout (config and state-dict names, shapes and
dtypes) the first time it sees it, and every export fills them with the model's current tensors.
With a cache directory the templates outlive the process (onnx_graph_cache.py): a resumed or
restarted engine reads them instead of tracing.

The templates are traced on probe values (random, distinct per parameter), so that every weight
initializer is found, byte for byte, to be one state-dict tensor or its transpose (constant
folding stores Linear weights transposed, under generated names): in eval mode the exporter also
merges initializers of equal value (RMSNorm weights are all ones at init), which would tie
tensors that updates then tell apart. An initializer that is a permutation of a weight's values
in any other way stops the trace; the rest are the graph's constants.

Graphs whose weights pass EXTERNAL_BYTES share one external data file, onnx/model.onnx_data,
each tensor stored once, so two graphs never write weight files of the same name (torch's own
export writes one file per initializer name, and two graphs in one folder collide).
"""

import hashlib
import json
import logging
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper
from transformers import PreTrainedModel

from . import onnx_graph_cache as graph_cache
from .onnx_decode import DECODE_FILE, export_decode_onnx, has_decode_graph
from .onnx_export import OPSET, WRAPPED, export_onnx

log = logging.getLogger('thinkfl_engine')

MODEL_FILE = 'model.onnx'
DATA_FILE = 'model.onnx_data'
# Below protobuf's 2 GB limit for one message with room for the graph: weights are stored inside
# each graph file below this, in DATA_FILE above it.
EXTERNAL_BYTES = 1536 * 2**20
# Offsets of tensors in DATA_FILE are multiples of this (a page), so readers may map them.
ALIGN = 4096

Tracer = Callable[[PreTrainedModel, Path], Optional[Path]]
GRAPHS: Tuple[Tuple[str, Tracer], ...] = ((MODEL_FILE, export_onnx), (DECODE_FILE, export_decode_onnx))


Source = graph_cache.Source


@dataclass
class GraphTemplate:
    """A traced graph whose initializers at `sources` (index -> source) have no data."""

    model: onnx.ModelProto
    sources: Dict[int, Source]


def named_tensors(model: PreTrainedModel) -> Dict[str, torch.Tensor]:
    """The model's state dict under the names its traced graphs give the initializers."""
    return {WRAPPED + name: t for name, t in model.state_dict().items()}


def layout_key(model: PreTrainedModel) -> str:
    """What the traced graphs depend on: the config (less where it was loaded from) and the
    state dict's names, shapes and dtypes; the weight values are not part of it."""
    config = {k: v for k, v in model.config.to_dict().items() if k not in ('_name_or_path', 'transformers_version')}
    tensors = [(name, list(t.shape), str(t.dtype)) for name, t in model.state_dict().items()]
    return json.dumps([OPSET, config, tensors], sort_keys=True, default=str)


@contextmanager
def probe_values(model: PreTrainedModel) -> Iterator[None]:
    """Every parameter (tied ones once) holds random values while inside; restored after."""
    gen = torch.Generator().manual_seed(0)
    saved = [(p, p.data) for p in model.parameters()]
    try:
        for p, data in saved:
            p.data = torch.randn(data.shape, generator=gen, dtype=data.dtype)
        yield
    finally:
        for p, data in saved:
            p.data = data


def _digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(a.tobytes(), digest_size=16).digest()


def _template(traced: onnx.ModelProto, probe: Dict[str, torch.Tensor], file: str) -> GraphTemplate:
    """Maps each initializer of a graph traced on probe values to the state-dict tensor it is,
    clearing its data; other initializers are the graph's constants and keep theirs."""
    by_size: Dict[int, List[np.ndarray]] = {}
    transposed: Dict[bytes, str] = {}
    for name, t in probe.items():
        by_size.setdefault(t.numel(), []).append(t.detach().numpy())
        if t.dim() == 2:
            transposed.setdefault(_digest(t.detach().t().contiguous().numpy()), name)
    sources: Dict[int, Source] = {}
    for i, init in enumerate(traced.graph.initializer):
        value = numpy_helper.to_array(init)
        src = probe.get(init.name)
        if src is not None:
            if list(src.shape) != list(value.shape) or src.detach().numpy().tobytes() != value.tobytes():
                raise RuntimeError(f'{file}: initializer {init.name} is not the state-dict tensor of that name')
            sources[i] = (init.name, False)
        elif value.ndim == 2 and _digest(value) in transposed:
            name = transposed[_digest(value)]
            if not np.array_equal(value, probe[name].detach().numpy().T):
                raise RuntimeError(f'{file}: initializer {init.name} matched {name} transposed by digest only')
            sources[i] = (name, True)
        if i in sources:
            init.ClearField('raw_data')
            continue
        # A constant computed from a weight would go stale after an update: refuse to template it.
        flat = np.sort(value.ravel())
        if any(np.array_equal(flat, np.sort(p.ravel())) for p in by_size.get(value.size, [])):
            raise RuntimeError(f'{file}: initializer {init.name} holds values derived from a weight')
    return GraphTemplate(traced, sources)


def trace_templates(model: PreTrainedModel) -> Dict[str, GraphTemplate]:
    """The templates of the model's graphs (model.onnx, and decode.onnx where its architecture has one)."""
    out: Dict[str, GraphTemplate] = {}
    with probe_values(model):
        probe = named_tensors(model)
        for file, trace in GRAPHS:
            # Each graph in a folder of its own: its traced weight files (over 2 GB) cannot collide.
            with tempfile.TemporaryDirectory(prefix='thinkfl-trace-') as tmp:
                path = trace(model, Path(tmp) / file)
                if path is None:
                    continue
                out[file] = _template(onnx.load(str(path), load_external_data=True), probe, file)
    return out


def _slot_misfit(source: Source, tensors: Dict[str, torch.Tensor], init: TensorProto) -> Optional[str]:
    """Why the tensor `source` names cannot fill the initializer (absent, another shape or dtype), or None."""
    name, transpose = source
    if name not in tensors:
        return f'no tensor {name}'
    t = tensors[name]
    shape = list(t.shape)[::-1] if transpose else list(t.shape)
    dtype = onnx.helper.np_dtype_to_tensor_dtype(torch.empty(0, dtype=t.dtype).numpy().dtype)
    if shape != list(init.dims) or dtype != init.data_type:
        return (
            f'{name}: {t.dtype} {shape} does not fit the traced initializer '
            f'({TensorProto.DataType.Name(init.data_type)} {list(init.dims)})'
        )
    return None


def _numpy(source: Source, tensors: Dict[str, torch.Tensor], init: TensorProto) -> np.ndarray:
    misfit = _slot_misfit(source, tensors, init)
    if misfit is not None:
        raise RuntimeError(misfit)
    name, transpose = source
    t = tensors[name].detach().to('cpu')
    return (t.t() if transpose else t).contiguous().numpy()


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_bytes(data)
    tmp.replace(path)


def write_graphs(
    templates: Dict[str, GraphTemplate], tensors: Dict[str, torch.Tensor], out_dir: Path, external: bool
) -> Dict[str, Path]:
    """Writes each template into out_dir with the given tensors as its weights: inside the graph
    files, or (external) in one DATA_FILE that all of them point into."""
    out_dir.mkdir(parents=True, exist_ok=True)
    placed: Dict[Source, Tuple[int, int]] = {}
    if external:
        tmp = out_dir / (DATA_FILE + '.tmp')
        with open(tmp, 'wb') as f:
            for tpl in templates.values():
                for i, source in tpl.sources.items():
                    if source in placed:
                        continue
                    arr = _numpy(source, tensors, tpl.model.graph.initializer[i])
                    f.write(b'\0' * (-f.tell() % ALIGN))
                    placed[source] = (f.tell(), arr.nbytes)
                    f.write(arr.data)
        tmp.replace(out_dir / DATA_FILE)
    paths: Dict[str, Path] = {}
    for file, tpl in templates.items():
        inits = tpl.model.graph.initializer
        for i, source in tpl.sources.items():
            init = inits[i]
            del init.external_data[:]
            if external:
                offset, length = placed[source]
                init.data_location = TensorProto.EXTERNAL
                for key, value in (('location', DATA_FILE), ('offset', str(offset)), ('length', str(length))):
                    entry = init.external_data.add()
                    entry.key, entry.value = key, value
            else:
                init.data_location = TensorProto.DEFAULT
                init.raw_data = _numpy(source, tensors, init).tobytes()
        try:
            _write_bytes(out_dir / file, tpl.model.SerializeToString())
        finally:
            for i in tpl.sources:
                inits[i].ClearField('raw_data')
        paths[file] = out_dir / file
    return paths


class PolicyGraphs:
    """The templates of every layout exported in this process (a template holds no weights); with a
    cache directory, also those an earlier engine traced (onnx_graph_cache.py)."""

    def __init__(self) -> None:
        self.templates: Dict[str, Dict[str, GraphTemplate]] = {}

    def write(
        self,
        model: PreTrainedModel,
        out_dir: Path,
        external: Optional[bool] = None,
        cache_dir: Optional[Path] = None,
    ) -> Dict[str, str]:
        """Writes the model's graphs into out_dir (onnx/); `graphs` says whether they were traced
        now ('traced': a layout not seen before), read from cache_dir ('cached') or only given the
        new weights ('weights')."""
        key = layout_key(model)
        tensors = named_tensors(model)
        how = 'weights'
        if key not in self.templates:
            how = self._open(model, key, tensors, cache_dir)
        if external is None:
            external = sum(t.numel() * t.element_size() for t in model.state_dict().values()) > EXTERNAL_BYTES
        paths = write_graphs(self.templates[key], tensors, out_dir, external)
        result = {'onnx': str(paths[MODEL_FILE]), 'graphs': how}
        if DECODE_FILE in paths:
            result['decode_onnx'] = str(paths[DECODE_FILE])
        return result

    def _open(
        self, model: PreTrainedModel, key: str, tensors: Dict[str, torch.Tensor], cache_dir: Optional[Path]
    ) -> str:
        """Fills self.templates[key] from the cache when it holds templates that fit `tensors`, else by tracing."""
        if cache_dir is not None:
            entry, stored = graph_cache.lookup(cache_dir, key)
            if stored is not None:
                templates = {file: GraphTemplate(m, sources) for file, (m, sources) in stored.items()}
                misfit = _misfit(model, templates, tensors)
                if misfit is None:
                    self.templates[key] = templates
                    return 'cached'
                log.warning('onnx graph cache %s does not fit this model (%s): tracing again', entry, misfit)
        self.templates[key] = trace_templates(model)
        if cache_dir is not None:
            graph_cache.store(cache_dir, key, {f: (t.model, t.sources) for f, t in self.templates[key].items()})
        return 'traced'


def _misfit(
    model: PreTrainedModel, templates: Dict[str, GraphTemplate], tensors: Dict[str, torch.Tensor]
) -> Optional[str]:
    """Why stored templates cannot take these tensors (a graph the model has is missing, a weight slot names
    no tensor of it, or one of another shape or dtype), or None when every slot fits."""
    want = {MODEL_FILE} | ({DECODE_FILE} if has_decode_graph(model.config) else set())
    if set(templates) != want:
        return f'graphs {sorted(templates)}, this model has {sorted(want)}'
    for file, tpl in templates.items():
        for i, source in tpl.sources.items():
            misfit = _slot_misfit(source, tensors, tpl.model.graph.initializer[i])
            if misfit is not None:
                return f'{file}: {misfit}'
    return None
