/**
 * The models a server answers for, by name. A request naming another model gets a 404
 * model_not_found (never a silent answer from a different policy); a request naming none gets
 * the first model, as vLLM does. /v1/models lists exactly these. Models (e.g. LoRA adapters)
 * can be added and removed while serving.
 */
import { ApiError } from './errors';
import type { ServedModel } from './served-model';

export class ServedModels {
  private readonly byId = new Map<string, ServedModel>();

  constructor(models: ServedModel[]) {
    for (const m of models) this.add(m);
  }

  add(model: ServedModel): void {
    if (this.byId.has(model.id)) throw new Error(`a model named ${JSON.stringify(model.id)} is already served`);
    this.byId.set(model.id, model);
  }

  remove(id: string): ServedModel | undefined {
    const m = this.byId.get(id);
    this.byId.delete(id);
    return m;
  }

  list(): ServedModel[] {
    return [...this.byId.values()];
  }

  /** The model a request's `model` field names; throws the 404 when none is served under that name. */
  resolve(name: string | null | undefined): ServedModel {
    const m = name == null ? this.list()[0] : this.byId.get(name);
    if (m) return m;
    const known = this.list().map((x) => x.id);
    throw new ApiError(404, `The model \`${name ?? ''}\` does not exist. Served: ${known.join(', ') || 'none'}.`, 'invalid_request_error', 'model_not_found', 'model');
  }
}
