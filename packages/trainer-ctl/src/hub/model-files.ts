/**
 * The files of a model directory that make up a full model (what transformers loads): what
 * download.ts takes from the hub, and push.ts uploads (with chat_template.json besides).
 */

/** Config, generation config, tokenizer files and chat template. */
export const MODEL_CONFIG_FILES = [
  /^config\.json$/,
  /^generation_config\.json$/,
  /^tokenizer(_config)?\.json$/,
  /^special_tokens_map\.json$/,
  /^(vocab\.json|merges\.txt|tokenizer\.model)$/,
  /\.jinja$/,
];

/** The weights as safetensors shards and their index. */
export const SAFETENSORS_FILES = [/\.safetensors$/, /\.safetensors\.index\.json$/];
