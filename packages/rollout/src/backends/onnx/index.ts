/** The `onnx` backend kind: a model directory opened with its own tokenizer. */
import { loadTokenizer } from '../../chat/tokenizer';
import type { BackendKind } from '../registry';
import { OnnxBackend, onnxSettingsSchema, type Detokenizer, type OnnxSettings } from './backend';

export { OnnxBackend, onnxSettingsSchema, type Detokenizer, type OnnxSettings } from './backend';

/** The detokenizer of a model directory's tokenizer.json. */
export function modelDetokenizer(modelDir: string): Detokenizer {
  const tok = loadTokenizer(modelDir);
  const eos = tok.eosToken === undefined ? undefined : tok.tokenId(tok.eosToken);
  return { decode: (ids) => tok.decode(ids), eosIds: eos === undefined ? [] : [eos] };
}

export async function openOnnxBackend(settings: OnnxSettings): Promise<OnnxBackend> {
  const s = onnxSettingsSchema.parse(settings);
  return OnnxBackend.create(s, modelDetokenizer(s.modelDir));
}

export const onnxKind: BackendKind = { name: 'onnx', settings: onnxSettingsSchema, open: (s) => openOnnxBackend(s as OnnxSettings) };
