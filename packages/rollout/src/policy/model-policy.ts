/**
 * A Policy backed by a language model: each turn's new messages are rendered and tokenized
 * once (EpisodeTokens), the backend continues the episode's ids, and the generated ids are
 * kept as they are (token-in/token-out). One instance plays one episode; its trajectory
 * (ids, generated-token mask, per-token log-probabilities) is what the trainer consumes.
 */
import type { AssistantMessage, Policy, PolicyContext, ToolSpec } from '@thinkfl/env';
import type { GenerationBackend } from '../backends/types';
import type { ChatModel } from '../chat/chat-model';
import { EpisodeTokens } from '../chat/episode-tokens';
import { ModelPolicySettingsSchema, turnSeed, type ModelPolicySettings, type ModelPolicySettingsInput } from './settings';

/** Context length when neither the settings nor config.json give one. */
const DEFAULT_MAX_CONTEXT = 8192;

export interface ModelTrajectory {
  /** The whole conversation as token ids, prompt scaffolding included. */
  ids: number[];
  /** 1 where the model generated the token. */
  mask: number[];
  /**
   * Log-probability of each generated token under the distribution that sampled it
   * (softmax(logits / temperature), before top-p); 0 where mask is 0. Always finite.
   */
  logprobs: number[];
  /** The sampling temperature of every generated token; the trainer recomputes log-probabilities at it. */
  temperature: number;
  /** Time spent in the backend, ms. */
  generateMs: number;
}

/** The episode outgrew the model's context: the turn cannot be generated, the episode ends. */
export class ContextLimitError extends Error {
  override name = 'ContextLimitError';
}

export interface ModelPolicyOptions {
  backend: GenerationBackend;
  chat: ChatModel;
  settings?: ModelPolicySettingsInput;
  /** Text that closes an assistant turn; default the tokenizer's eos_token. */
  endOfTurn?: string;
  name?: string;
}

export function parseModelPolicySettings(input: unknown, path = 'policy'): ModelPolicySettings {
  const r = ModelPolicySettingsSchema.safeParse(input ?? {});
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${[path, ...i.path.map(String)].join('.')}: ${i.message}`);
  throw new Error(`invalid model policy settings: ${issues.join('; ')}`);
}

function configContext(chat: ChatModel): number | undefined {
  const v = chat.modelDir.config?.max_position_embeddings;
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;
}

export class ModelPolicy implements Policy {
  readonly name: string;
  readonly settings: ModelPolicySettings;
  private readonly maxContext: number;
  private tokens?: EpisodeTokens;
  private readonly logprobs: number[] = [];
  /** ctx.messages already fed to the tokens; our reply to them comes next. */
  private consumed = 0;
  private lastContent?: string;
  private generateMs = 0;
  private tools: readonly ToolSpec[] = [];

  constructor(private readonly opts: ModelPolicyOptions) {
    this.name = opts.name ?? 'model';
    this.settings = parseModelPolicySettings(opts.settings);
    this.maxContext = this.settings.maxContext ?? configContext(opts.chat) ?? DEFAULT_MAX_CONTEXT;
  }

  async next(ctx: PolicyContext): Promise<AssistantMessage> {
    const tokens = this.tokensFor(ctx.tools);
    const fresh = ctx.messages.slice(this.consumed);
    if (this.lastContent !== undefined) {
      // The protocol records our reply before anything else; anything else means a lost turn.
      const mine = fresh.shift();
      if (mine?.role !== 'assistant' || mine.content !== this.lastContent) {
        throw new Error(`turn ${ctx.turn}: the conversation does not continue from this policy's last reply`);
      }
    }
    const promptIds = tokens.prompt(fresh);
    this.consumed = ctx.messages.length;
    this.padLogprobs();
    const room = this.maxContext - promptIds.length;
    if (room <= 0) {
      throw new ContextLimitError(`context limit: the prompt of turn ${ctx.turn} has ${promptIds.length} tokens, the model takes ${this.maxContext}`);
    }
    const s = this.settings;
    const started = performance.now();
    const [gen] = await this.opts.backend.generate([
      {
        promptIds,
        sampling: {
          temperature: s.temperature,
          topP: s.topP,
          maxTokens: Math.min(s.maxTokens, room),
          // Backends stop on the eos token by themselves; another end-of-turn text needs a stop string.
          stop: this.opts.endOfTurn !== undefined && this.opts.endOfTurn !== this.opts.chat.tokenizer.eosToken ? [this.opts.endOfTurn] : [],
          ...(s.seed !== undefined && { seed: turnSeed(s.seed, ctx.turn) }),
        },
      },
    ]);
    this.generateMs += performance.now() - started;
    const bad = gen.logprobs.findIndex((lp) => !Number.isFinite(lp));
    if (bad >= 0) {
      // JSON would carry it as null and the trainer's importance ratio would be infinite.
      throw new Error(
        `turn ${ctx.turn}: the backend reported log-probability ${gen.logprobs[bad]} for generated token ${bad} (id ${gen.tokenIds[bad]}); ` +
          'a sampled token has a finite log-probability under the distribution that sampled it',
      );
    }
    const message: AssistantMessage = { content: gen.text };
    tokens.appendGenerated(gen.tokenIds, message);
    this.logprobs.push(...gen.logprobs);
    this.padLogprobs();
    this.lastContent = gen.text;
    return message;
  }

  /** The episode so far as token ids, generated-token mask and aligned log-probabilities. */
  trajectory(): ModelTrajectory {
    const t = this.tokens;
    return {
      ids: t ? [...t.ids] : [],
      mask: t ? [...t.mask] : [],
      logprobs: [...this.logprobs],
      temperature: this.settings.temperature,
      generateMs: this.generateMs,
    };
  }

  /** The tools rendered into the prompt: those offered on the first turn (the system prompt's), or none. */
  get offeredTools(): readonly ToolSpec[] {
    return this.tools;
  }

  private tokensFor(tools: readonly ToolSpec[]): EpisodeTokens {
    if (!this.tokens) this.tools = this.settings.renderTools ? tools : [];
    this.tokens ??= new EpisodeTokens(this.opts.chat.template, this.opts.chat.tokenizer, {
      tools: this.tools,
      ...(this.opts.endOfTurn !== undefined && { endOfTurn: this.opts.endOfTurn }),
    });
    return this.tokens;
  }

  /** Tokens the model did not generate (prompt, end-of-turn added after a length stop) carry 0. */
  private padLogprobs(): void {
    const n = this.tokens?.ids.length ?? 0;
    while (this.logprobs.length < n) this.logprobs.push(0);
  }
}
