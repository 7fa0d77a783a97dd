"""Reference token ids for chat-template-parity.test.ts: transformers' apply_chat_template(tokenize=True).

stdin: {"dir": model dir, "cases": [{"messages", "tools", "add_generation_prompt", "date_string"}]}
stdout: one list of token ids per case, as JSON.
"""
import json
import sys

from transformers import AutoTokenizer

request = json.load(sys.stdin)
tokenizer = AutoTokenizer.from_pretrained(request['dir'])
out = []
for case in request['cases']:
    ids = tokenizer.apply_chat_template(case['messages'], tools=case.get('tools'), tokenize=True, return_dict=False,
                                        add_generation_prompt=case['add_generation_prompt'],
                                        date_string=case['date_string'])
    out.append(list(ids))
print(json.dumps(out))
