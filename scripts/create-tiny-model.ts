/**
 * Creates the tiny CI model, offline, in the model-directory layout of a real backbone:
 * tokenizer.json + tokenizer_config.json (chat template with tools) fitted to the dataset's
 * vocabulary, config.json + generation_config.json + model.safetensors (a transformers LlamaForCausalLM,
 * or Qwen2ForCausalLM with --architecture qwen2, random init by the train engine), onnx/model.onnx.
 *
 *   npx tsx scripts/create-tiny-model.ts --dataset DIR --out DIR [--seed N] [--hidden-size N] ...
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { writeTinyTokenizer } from '../packages/rollout/src/chat/tiny-tokenizer';
import { TinyModelConfigSchema, TrainEngine } from '../packages/trainer-ctl/src/engine/index';

const argv = await yargs(hideBin(process.argv))
  .scriptName('create-tiny-model')
  .strict()
  .option('dataset', { type: 'string', demandOption: true, describe: 'imported dataset dir (fits the tokenizer)' })
  .option('out', { type: 'string', demandOption: true, describe: 'model dir to write' })
  .option('seed', { type: 'number', default: 0, describe: 'weight init seed' })
  .option('hidden-size', { type: 'number', describe: 'residual width (default 256)' })
  .option('layers', { type: 'number', describe: 'decoder blocks (default 4)' })
  .option('heads', { type: 'number', describe: 'query heads (default 4)' })
  .option('kv-heads', { type: 'number', describe: 'key/value heads (default: as many as query heads)' })
  .option('head-dim', { type: 'number', describe: 'width of one head (default 64)' })
  .option('intermediate-size', { type: 'number', describe: 'MLP width (default 512)' })
  .option('architecture', {
    choices: ['llama', 'qwen2'] as const,
    default: 'llama' as const,
    describe: 'transformers model type (Qwen2 adds q/k/v biases)',
  })
  .parseAsync();

const started = Date.now();
const tok = await writeTinyTokenizer(argv.out, argv.dataset);
const heads = argv.heads;
const config = TinyModelConfigSchema.parse({
  architecture: argv.architecture,
  vocab_size: tok.vocabSize,
  eos_token_id: tok.eosTokenId,
  pad_token_id: tok.padTokenId,
  ...(argv.hiddenSize !== undefined && { hidden_size: argv.hiddenSize }),
  ...(argv.layers !== undefined && { num_hidden_layers: argv.layers }),
  ...(heads !== undefined && { num_attention_heads: heads, num_key_value_heads: argv.kvHeads ?? heads }),
  ...(heads === undefined && argv.kvHeads !== undefined && { num_key_value_heads: argv.kvHeads }),
  ...(argv.headDim !== undefined && { head_dim: argv.headDim }),
  ...(argv.intermediateSize !== undefined && { intermediate_size: argv.intermediateSize }),
});
const engine = new TrainEngine({ onStderr: (t) => process.stderr.write(t) });
try {
  const { parameters } = await engine.request('create_tiny', { out_dir: argv.out, config, seed: argv.seed });
  await engine.request('load', { model_dir: argv.out });
  const { onnx } = await engine.request('export', { dir: argv.out, format: 'onnx' });
  console.log(
    `wrote ${argv.out}: ${tok.vocabSize} tokens, ${parameters} parameters, ${onnx} (${((Date.now() - started) / 1000).toFixed(1)} s)`,
  );
} finally {
  await engine.shutdown();
}
