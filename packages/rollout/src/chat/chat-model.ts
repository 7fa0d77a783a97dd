/** A backbone's chat side in one place: its model directory, tokenizer and chat template. */
import { loadModelDir, type ModelDir } from './model-dir';
import { ChatTemplate, type ChatTemplateSettings } from './template';
import { Tokenizer } from './tokenizer';

export interface ChatModel {
  modelDir: ModelDir;
  tokenizer: Tokenizer;
  template: ChatTemplate;
}

export function loadChatModel(dir: string, settings: Partial<ChatTemplateSettings> = {}): ChatModel {
  const modelDir = loadModelDir(dir);
  return { modelDir, tokenizer: new Tokenizer(modelDir), template: ChatTemplate.fromModelDir(modelDir, settings) };
}
