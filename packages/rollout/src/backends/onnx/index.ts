/** The `onnx` backend kind: a model directory opened with its own tokenizer. */
import { loadTokenizer, type Tokenizer } from '../../chat/tokenizer';
import type { BackendKind } from '../backend-kind';
import { OnnxBackend, onnxSettingsSchema, type Detokenizer, type OnnxSettings } from './backend';
import { policyModelDir } from './model';

export { OnnxBackend, onnxSettingsSchema, type Detokenizer, type OnnxSettings } from './backend';
export { MERGED_DIR, policyModelDir } from './model';

/** Decoding and the eos_token id of a loaded tokenizer. */
export function detokenizerOf(tok: Tokenizer): Detokenizer {
  const eos = tok.eosToken === undefined ? undefined : tok.tokenId(tok.eosToken);
  return { decode: (ids) => tok.decode(ids), eosIds: eos === undefined ? [] : [eos] };
}

/** The detokenizer of a model directory's tokenizer.json. */
export function modelDetokenizer(modelDir: string): Detokenizer {
  return detokenizerOf(loadTokenizer(modelDir));
}

export async function openOnnxBackend(settings: OnnxSettings): Promise<OnnxBackend> {
  const s = onnxSettingsSchema.parse(settings);
  return OnnxBackend.create(s, modelDetokenizer(policyModelDir(s.model_dir)));
}

export const onnxKind: BackendKind = { name: 'onnx', settings: onnxSettingsSchema, open: (s) => openOnnxBackend(s as OnnxSettings) };
