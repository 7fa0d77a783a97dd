"""onnxruntime-genai on the project's export (onnx/model.onnx), greedy decoding: run by decode.ts.

argv[1]: the model dir, argv[2]: intra-op threads. genai_config.json (written next to a link to the
export in a temporary dir) names the export's inputs and outputs, which follow ONNX Runtime /
Optimum's KV-cache names. Each stdin line {ids, batch, new_tokens} runs one generation of `batch`
copies of the prompt; the answer is {ms, tokens, first} (generated tokens in all rows, row 0's ids).
"""
import json
import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime_genai as og

out = os.fdopen(os.dup(1), 'w', buffering=1)
os.dup2(2, 1)
model_dir, threads = sys.argv[1], int(sys.argv[2])
c = json.load(open(os.path.join(model_dir, 'config.json')))
eos = c['eos_token_id']
eos = eos if isinstance(eos, int) else eos[0]
head = c.get('head_dim') or c['hidden_size'] // c['num_attention_heads']
work = tempfile.mkdtemp(prefix='genai-')
os.symlink(os.path.join(model_dir, 'onnx', 'model.onnx'), os.path.join(work, 'model.onnx'))
config = {
    'model': {
        'bos_token_id': c.get('bos_token_id'), 'eos_token_id': eos, 'pad_token_id': c.get('pad_token_id') or eos,
        'context_length': c.get('max_position_embeddings', 8192), 'vocab_size': c['vocab_size'], 'type': c['model_type'],
        'decoder': {
            'session_options': {'log_id': 'onnxruntime-genai', 'provider_options': [], 'intra_op_num_threads': threads},
            'filename': 'model.onnx', 'head_size': head, 'hidden_size': c['hidden_size'],
            'num_attention_heads': c['num_attention_heads'], 'num_hidden_layers': c['num_hidden_layers'],
            'num_key_value_heads': c.get('num_key_value_heads', c['num_attention_heads']),
            'inputs': {'input_ids': 'input_ids', 'attention_mask': 'attention_mask', 'position_ids': 'position_ids',
                       'past_key_names': 'past_key_values.%d.key', 'past_value_names': 'past_key_values.%d.value'},
            'outputs': {'logits': 'logits', 'present_key_names': 'present.%d.key', 'present_value_names': 'present.%d.value'},
        },
    },
    # The export concatenates past and new key/values (present is P+T long): no shared buffer.
    'search': {'do_sample': False, 'num_beams': 1, 'num_return_sequences': 1, 'past_present_share_buffer': False,
               'max_length': 8192, 'min_length': 0, 'top_k': 1, 'top_p': 1.0, 'temperature': 1.0},
}
# genai wants numbers: an id the tiny model does not have (no BOS) is left out.
config['model'] = {k: v for k, v in config['model'].items() if v is not None}
json.dump(config, open(os.path.join(work, 'genai_config.json'), 'w'))
model = og.Model(work)
out.write(json.dumps({'ready': True, 'version': og.__version__}) + '\n')
for line in sys.stdin:
    req = json.loads(line)
    ids = np.array([req['ids']] * req['batch'], dtype=np.int32)
    t0 = time.perf_counter()
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=ids.shape[1] + req['new_tokens'], batch_size=req['batch'], do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    while not gen.is_done():
        gen.generate_next_token()
    ms = (time.perf_counter() - t0) * 1000
    rows = [gen.get_sequence(i)[ids.shape[1]:].tolist() for i in range(req['batch'])]
    # A row that ended at EOS is padded after it: count up to and including the first EOS.
    counted = [r[:r.index(eos) + 1] if eos in r else r for r in rows]
    out.write(json.dumps({'ms': ms, 'tokens': sum(len(r) for r in counted), 'first': counted[0]}) + '\n')
