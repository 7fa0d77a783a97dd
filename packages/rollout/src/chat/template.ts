/**
 * Renders conversations with the backbone's own Jinja chat template (@huggingface/jinja),
 * passing what transformers' apply_chat_template passes: messages, tools as OpenAI function
 * specs, add_generation_prompt and the special tokens.
 */
import { Template } from '@huggingface/jinja';
import { z } from 'zod';
import type { AssistantMessage, ChatMessage, ToolSpec } from '@thinkfl/env';
import { specialTokenText, type ModelDir } from './model-dir';

export const ChatTemplateSettings = z.object({
  /**
   * Date the Llama-3.x templates print as "Today Date". Fixed (default "26 Jul 2024", the
   * templates' own fallback) rather than today's, so renders of one episode never change
   * across midnight and runs are reproducible.
   */
  dateString: z.string().min(1).default('26 Jul 2024'),
});
export type ChatTemplateSettings = z.infer<typeof ChatTemplateSettings>;

export interface RenderOptions {
  tools?: readonly ToolSpec[];
  /** End with the header of a new assistant turn (the generation prompt). Default false. */
  addGenerationPrompt?: boolean;
}

/** A tool as transformers hands it to templates: {type: "function", function: {...}}. */
export function templateTools(tools: readonly ToolSpec[]): Record<string, unknown>[] {
  return tools.map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
}

function parseArguments(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    // A malformed call is still rendered (and later graded), as the raw text the model wrote.
    return raw;
  }
}

/**
 * A message in the shape chat templates expect. Tool-call arguments become objects, as in
 * transformers' chat format: Qwen2.5 and Llama-3.x render them with `| tojson`, which would
 * quote a JSON string a second time.
 */
export function templateMessage(m: ChatMessage | (AssistantMessage & { role: 'assistant' })): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.tool_calls && m.tool_calls.length > 0) {
    out.tool_calls = m.tool_calls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.function.name, arguments: parseArguments(c.function.arguments) },
    }));
  }
  if ('tool_call_id' in m && m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if ('name' in m && m.name !== undefined) out.name = m.name;
  return out;
}

export class ChatTemplate {
  private readonly template: Template;
  private readonly specials: Record<string, string>;
  readonly settings: ChatTemplateSettings;

  constructor(
    readonly source: string,
    specialTokens: Record<string, string | undefined>,
    settings: Partial<ChatTemplateSettings> = {},
  ) {
    this.settings = ChatTemplateSettings.parse(settings);
    try {
      this.template = new Template(source);
    } catch (e) {
      throw new Error(`chat template does not parse: ${(e as Error).message}`);
    }
    this.specials = {};
    for (const [k, v] of Object.entries(specialTokens)) if (v !== undefined) this.specials[k] = v;
  }

  static fromModelDir(model: ModelDir, settings: Partial<ChatTemplateSettings> = {}): ChatTemplate {
    const c = model.tokenizerConfig;
    return new ChatTemplate(
      model.chatTemplate,
      {
        bos_token: specialTokenText(c.bos_token),
        eos_token: specialTokenText(c.eos_token),
        pad_token: specialTokenText(c.pad_token),
        unk_token: specialTokenText(c.unk_token),
      },
      settings,
    );
  }

  render(messages: readonly ChatMessage[], opts: RenderOptions = {}): string {
    const context: Record<string, unknown> = {
      ...this.specials,
      messages: messages.map(templateMessage),
      add_generation_prompt: opts.addGenerationPrompt ?? false,
      date_string: this.settings.dateString,
    };
    if (opts.tools && opts.tools.length > 0) context.tools = templateTools(opts.tools);
    try {
      return this.template.render(context);
    } catch (e) {
      throw new Error(`chat template failed on ${messages.length} messages: ${(e as Error).message}`);
    }
  }
}
