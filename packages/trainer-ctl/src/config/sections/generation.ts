/** generation: the backend that plays the policy, sampling settings, temperature per stage. */
import { onnxSettingsSchema, openaiSettingsSchema, samplingSchema, vllmSettingsSchema } from '@thinkfl/rollout';
import { z } from 'zod';

const temperature = (def: number, why: string) =>
  z.number().min(0).max(100).default(def).describe(`Sampling temperature of the stage; ${why} Default ${def}.`);

export const GenerationSection = z
  .strictObject({
    backend: z
      .discriminatedUnion('kind', [
        onnxSettingsSchema.partial({ model_dir: true }).extend({
          kind: z.literal('onnx').describe('onnxruntime-node in process: tiny models on CPU, exported models locally.'),
        }),
        openaiSettingsSchema.extend({
          kind: z.literal('openai').describe('An OpenAI-compatible HTTP server (teacher models; plays whatever model it serves).'),
        }),
        vllmSettingsSchema.extend({
          kind: z
            .literal('vllm')
            .describe('vLLM servers (or trainer-ctl serve replicas) with each policy version synced as a LoRA adapter over HTTP.'),
          staleness: z
            .number()
            .int()
            .min(0)
            .optional()
            .describe(
              'Policy versions kept loaded behind the newest; older ones are unloaded once their requests finish. Default workers.max_staleness.',
            ),
          policy_format: z
            .enum(['onnx', 'weights'])
            .default('onnx')
            .describe(
              'What the train worker writes into <run>/adapters/v<N> (with manifest.json) for the servers to load by path. ' +
                "With model.lora: 'weights', the PEFT adapter (adapter_config.json, adapter_model.safetensors) that vLLM loads; " +
                "'onnx', that adapter plus the merged model with its ONNX export in merged/, which trainer-ctl serve loads " +
                "for the same path. Without model.lora: 'onnx', the full model with its ONNX export (trainer-ctl serve " +
                "only; vLLM loads adapters only), and 'weights' is refused. Default onnx.",
            ),
        }),
      ])
      .prefault({ kind: 'onnx' })
      .describe(
        'Generation backend as { kind, ...its settings } (packages/rollout/src/backends). For onnx, model_dir ' +
          'defaults to the policy the trainer exports. Default { kind: onnx }.',
      ),
    render_tools: z
      .boolean()
      .default(true)
      .describe(
        'Render the offered tools into the prompt through the chat template (tools=...), as a backbone expects. ' +
          "false: the system prompt's own tool list is all the model reads (the tiny CI model). Applies to the " +
          "teacher's SFT conversations too. Default true.",
      ),
    sampling: samplingSchema
      .omit({ temperature: true, seed: true })
      .prefault({})
      .describe(
        'Sampling settings of every request (top_p, max_tokens per assistant turn, stop, top_logprobs); seeds derive from run.seed.',
      ),
    temperature: z
      .strictObject({
        priming: temperature(1.0, 'higher in stage 1 so that format-aware priming explores (ThinkFL).'),
        exploration: temperature(0.9, 'between the two.'),
        refinement: temperature(0.7, 'lower while ranking is refined.'),
        eval: temperature(0, '0 is greedy decoding for evaluation.'),
      })
      .prefault({})
      .describe('Sampling temperature per stage and for evaluation.'),
  })
  .describe('How the policy generates.');
