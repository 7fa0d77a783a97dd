/** The chat model (tokenizer + template) a run config names. */
import { readFileSync } from 'node:fs';
import { ChatTemplate, loadChatModel, loadModelDir, specialTokenText, Tokenizer, type ChatModel } from '@thinkfl/rollout';
import type { RunConfig } from '../config/schema';

/** tokenizer.dir (default the model dir) with chat_template 'auto' or a .jinja file. */
export function chatModelFromConfig(config: RunConfig): ChatModel {
  const dir = config.tokenizer.dir ?? config.model.dir;
  const t = config.tokenizer.chat_template;
  if (t === 'auto') return loadChatModel(dir);
  if (!/\.(jinja|j2)$/.test(t)) {
    throw new Error(`tokenizer.chat_template: ${JSON.stringify(t)} is not supported by the workers; use auto or a .jinja file`);
  }
  const modelDir = loadModelDir(dir);
  const c = modelDir.tokenizerConfig;
  const template = new ChatTemplate(readFileSync(t, 'utf8'), {
    bos_token: specialTokenText(c.bos_token),
    eos_token: specialTokenText(c.eos_token),
    pad_token: specialTokenText(c.pad_token),
    unk_token: specialTokenText(c.unk_token),
  });
  return { modelDir, tokenizer: new Tokenizer(modelDir), template };
}
