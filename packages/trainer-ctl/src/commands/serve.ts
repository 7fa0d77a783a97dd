/**
 * `trainer-ctl serve --model DIR`: an OpenAI-compatible server (completions, chat completions
 * with tool calls, streamed or whole, models, /health, /metrics) over the `onnx` backend, so a
 * trained model can be used by any OpenAI client, the `openai` and `vllm` backends included. With
 * --enable-lora it speaks vLLM's runtime LoRA endpoints: POST /v1/load_lora_adapter names a policy
 * directory (for ONNX the merged export the trainer writes beside the adapter), served under the
 * adapter's name until /v1/unload_lora_adapter; with --enable-sleep-mode, vLLM's /sleep,
 * /wake_up and /is_sleeping. Its work is bounded: request body size,
 * prompt length against the context before tokenizing, generations running and queued.
 */
import type { CommandModule } from 'yargs';
import { openLocalModel, startServer } from '@thinkfl/rollout';
import { THREADS_OPTION } from '../cli-options';

interface Args {
  model: string;
  port: number;
  host: string;
  threads: number;
  'kv-cache': 'auto' | 'off';
  name?: string;
  'max-body-mb': number;
  'max-concurrent': number;
  'max-queue': number;
  'enable-lora': boolean;
  'enable-sleep-mode': boolean;
}

export const command: CommandModule<object, Args> = {
  command: 'serve',
  describe: 'serve a model directory over an OpenAI-compatible HTTP API (onnx backend)',
  builder: (y) =>
    y
      .option('model', { type: 'string', demandOption: true, describe: 'model directory (config.json, tokenizer files, onnx/model.onnx)' })
      .option('port', { type: 'number', default: 8000, describe: 'TCP port; 0 picks a free one' })
      .option('host', { type: 'string', default: '127.0.0.1', describe: 'address to listen on' })
      .option('threads', THREADS_OPTION)
      .option('kv-cache', { choices: ['auto', 'off'] as const, default: 'auto' as const, describe: "use the export's KV cache" })
      .option('name', { type: 'string', describe: 'model name to answer with (default: the directory name)' })
      .option('max-body-mb', { type: 'number', default: 32, describe: 'largest request body, MiB; a larger one gets HTTP 413' })
      .option('max-concurrent', { type: 'number', default: 4, describe: 'generations running at once' })
      .option('max-queue', {
        type: 'number',
        default: 64,
        describe: 'generation requests waiting for a slot; one more gets HTTP 429 with Retry-After',
      })
      .option('enable-lora', {
        type: 'boolean',
        default: false,
        describe: "load policies at run time (vLLM's --enable-lora); without it /v1/load_lora_adapter answers 500 as vLLM's does",
      })
      .option('enable-sleep-mode', {
        type: 'boolean',
        default: false,
        describe: "serve vLLM's POST /sleep, POST /wake_up and GET /is_sleeping (its --enable-sleep-mode with VLLM_SERVER_DEV_MODE=1)",
      })
      .check((a) => {
        for (const k of ['max-concurrent', 'max-queue'] as const) {
          if (!Number.isInteger(a[k]) || a[k] < (k === 'max-queue' ? 0 : 1))
            throw new Error(`--${k} must be an integer ${k === 'max-queue' ? '>= 0' : '>= 1'}`);
        }
        if (!(a['max-body-mb'] > 0)) throw new Error('--max-body-mb must be positive');
        return true;
      }),
  handler: async (args) => {
    const opts = { threads: args.threads, kv_cache: args['kv-cache'] };
    const model = await openLocalModel(args.model, { ...opts, id: args.name });
    const server = await startServer(model, {
      ...(args['enable-lora'] ? { loadAdapter: (name: string, path: string) => openLocalModel(path, { ...opts, id: name }) } : {}),
      sleepMode: args['enable-sleep-mode'],
      host: args.host,
      port: args.port,
      maxBodyBytes: Math.round(args['max-body-mb'] * 1024 * 1024),
      maxConcurrent: args['max-concurrent'],
      maxQueue: args['max-queue'],
    });
    process.stdout.write(`serving ${model.id} at ${server.url}\n`);
    const stop = async () => {
      await server.close();
      await model.close();
      process.exit(0);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  },
};
