"""A pandas filter of the day's spans by parent span id, the way ThinkFL's tool reads traces: run by tools.ts.

argv[1]: a CSV of the spans (span_id, parent_id, start_us, ...). Each stdin line is a JSON list of
span ids; the answer is one JSON line: per id, the microseconds of one filter and the children found.
"""
import json
import os
import sys
import time

import pandas as pd

out = os.fdopen(os.dup(1), 'w', buffering=1)
os.dup2(2, 1)
spans = pd.read_csv(sys.argv[1], dtype={'span_id': str, 'parent_id': str})


def children(span_id):
    return spans[spans['parent_id'] == span_id].sort_values('start_us')


children(spans['span_id'].iloc[0])  # warm-up
out.write(json.dumps({'ready': True, 'spans': len(spans)}) + '\n')
for line in sys.stdin:
    us, found = [], []
    for span_id in json.loads(line):
        t0 = time.perf_counter_ns()
        n = len(children(span_id))
        us.append((time.perf_counter_ns() - t0) / 1000)
        found.append(n)
    out.write(json.dumps({'us': us, 'found': found}) + '\n')
