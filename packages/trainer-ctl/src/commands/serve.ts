/**
 * `trainer-ctl serve --model DIR`: an OpenAI-compatible server (completions, chat completions
 * with tool calls, models) over the `onnx` backend, so a trained model can be used by any
 * OpenAI client, the `openai` backend included.
 */
import type { CommandModule } from 'yargs';
import { openLocalModel, startServer } from '@thinkfl/rollout';

interface Args {
  model: string;
  port: number;
  host: string;
  threads: number;
  'kv-cache': 'auto' | 'off';
  name?: string;
}

export const command: CommandModule<object, Args> = {
  command: 'serve',
  describe: 'serve a model directory over an OpenAI-compatible HTTP API (onnx backend)',
  builder: (y) =>
    y
      .option('model', { type: 'string', demandOption: true, describe: 'model directory (config.json, tokenizer files, onnx/model.onnx)' })
      .option('port', { type: 'number', default: 8000, describe: 'TCP port; 0 picks a free one' })
      .option('host', { type: 'string', default: '127.0.0.1', describe: 'address to listen on' })
      .option('threads', { type: 'number', default: 0, describe: 'onnxruntime threads per operator; 0 lets it choose' })
      .option('kv-cache', { choices: ['auto', 'off'] as const, default: 'auto' as const, describe: "use the export's KV cache" })
      .option('name', { type: 'string', describe: 'model name to answer with (default: the directory name)' }),
  handler: async (args) => {
    const model = await openLocalModel(args.model, { id: args.name, threads: args.threads, kvCache: args['kv-cache'] });
    const server = await startServer(model, { host: args.host, port: args.port });
    process.stdout.write(`serving ${model.id} at ${server.url}\n`);
    const stop = async () => {
      await server.close();
      await model.backend.close();
      process.exit(0);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  },
};
