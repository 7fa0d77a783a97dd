/**
 * vLLM's runtime LoRA endpoints: POST /v1/load_lora_adapter {lora_name, lora_path,
 * load_inplace} and POST /v1/unload_lora_adapter {lora_name}, answered as vLLM 0.33 answers them
 * (vllm/entrypoints/openai/models/serving.py): plain-text success; 400 for a name already loaded
 * unless load_inplace, which swaps the weights under the name and points its /v1/models root at
 * the new path; 400 for a base model's name; 500 when the server runs without --enable-lora; 404
 * for unloading a name not served. A path that cannot be loaded is a 400 naming it. What a path
 * holds is the loader's business: for the onnx backend a policy directory, whose LoRA adapter is
 * served through the merged export the trainer writes beside it (merged/), under the adapter's
 * name.
 */
import { ApiError, BadRequest } from './errors';
import type { ServedModels } from './models';
import { loadAdapterSchema, parseBody, unloadAdapterSchema } from './protocol';
import type { ServedModel } from './served-model';

/** Opens the model an adapter path names, served under `name`. */
export type AdapterLoader = (name: string, path: string) => Promise<ServedModel>;

export class Adapters {
  /** Names being loaded now: a second load of one is refused like a loaded one. */
  private readonly loading = new Set<string>();

  constructor(
    private readonly models: ServedModels,
    /** Absent: the server runs without --enable-lora. */
    private readonly loader: AdapterLoader | undefined,
  ) {}

  async load(raw: unknown): Promise<string> {
    const { lora_name: name, lora_path: path, load_inplace: inplace } = parseBody(loadAdapterSchema, raw);
    if (!this.loader) throw new ApiError(500, 'LoRA is not enabled. Use --enable-lora to enable LoRA.', 'InternalServerError');
    if (this.models.isBase(name)) throw new BadRequest(`The lora adapter '${name}' conflicts with a served base model.`, 'lora_name');
    if ((this.models.has(name) && !inplace) || this.loading.has(name)) {
      throw new BadRequest(
        `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
        'lora_name',
      );
    }
    this.loading.add(name);
    try {
      let model: ServedModel;
      try {
        model = await this.loader(name, path);
      } catch (e) {
        throw new BadRequest(`Loading lora ${name} from ${path} failed: ${(e as Error).message}`, 'lora_path');
      }
      if (this.models.has(name)) this.models.replace(model, path);
      else this.models.add(model, path);
    } finally {
      this.loading.delete(name);
    }
    return `Success: LoRA adapter '${name}' added successfully.`;
  }

  unload(raw: unknown): string {
    const { lora_name: name } = parseBody(unloadAdapterSchema, raw);
    if (this.models.isBase(name)) throw new BadRequest(`'${name}' is the base model, not a lora adapter`, 'lora_name');
    if (!this.models.remove(name))
      throw new ApiError(404, `The lora adapter '${name}' cannot be found.`, 'not_found_error', 'model_not_found', 'lora_name');
    return `Success: LoRA adapter '${name}' removed successfully.`;
  }
}
