"""How many operators onnxruntime runs for an ONNX graph once its own graph optimizations are done
(the level the onnx backend loads with, 'all'), by type: on a small model a decode step costs mostly
per operator run (docs/benchmarks.md), so this counts what a change to an export removes.

    .cache/venv/bin/python scripts/bench/onnx-operators.py GRAPH.onnx [GRAPH.onnx ...]
"""
import collections
import sys
import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort

for path in sys.argv[1:]:
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # 'all' writes hardware-specific fusions; fine for counting on this machine.
        so.log_severity_level = 3
        so.optimized_model_filepath = str(Path(tmp) / 'optimized.onnx')
        ort.InferenceSession(path, so, providers=['CPUExecutionProvider'])
        nodes = onnx.load(so.optimized_model_filepath, load_external_data=False).graph.node
    kinds = collections.Counter(n.op_type for n in nodes).most_common()
    print(f'{path}: {len(nodes)} operators after onnxruntime\'s optimizations: ' + ', '.join(f'{k} {v}' for k, v in kinds))
