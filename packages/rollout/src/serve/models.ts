/**
 * The models a server answers for, by name. A request naming another model gets a 404
 * model_not_found (never a silent answer from a different policy); a request naming none gets
 * the first model, as vLLM does. /v1/models lists exactly these. Models (LoRA adapters, or
 * for ONNX the merged export beside one) are added and removed while serving: a removed model
 * is closed once the requests holding it have finished.
 */
import { ApiError } from './errors';
import type { ServedModel } from './served-model';

interface Entry {
  model: ServedModel;
  /** Where it was loaded from, for adapters (lora_path). */
  path?: string;
  /** Requests holding it now. */
  holders: number;
  retired: boolean;
}

export class ServedModels {
  private readonly byId = new Map<string, Entry>();
  /** The models served from the start (not adapters): they cannot be unloaded. */
  private readonly base = new Set<string>();

  constructor(models: ServedModel[]) {
    for (const m of models) {
      this.add(m);
      this.base.add(m.id);
    }
  }

  add(model: ServedModel, path?: string): void {
    if (this.byId.has(model.id)) throw new Error(`a model named ${JSON.stringify(model.id)} is already served`);
    this.byId.set(model.id, { model, path, holders: 0, retired: false });
  }

  /**
   * Serves `model` under its name in place of the one there (vLLM's load_inplace), loaded from
   * `path`; the old one is closed once the requests holding it have finished.
   */
  replace(model: ServedModel, path: string): void {
    this.remove(model.id);
    this.add(model, path);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  isBase(id: string): boolean {
    return this.base.has(id);
  }

  /** Stops serving `id`; the model is closed once no request holds it. Undefined when it is not served. */
  remove(id: string): ServedModel | undefined {
    const e = this.byId.get(id);
    if (!e) return undefined;
    this.byId.delete(id);
    e.retired = true;
    if (e.holders === 0) void e.model.close();
    return e.model;
  }

  /** Served models in load order; adapters carry their path and the first base model as parent. */
  list(): { model: ServedModel; path?: string; parent?: string }[] {
    const root = [...this.base][0];
    return this.entries().map((e) => ({ model: e.model, ...(e.path ? { path: e.path, parent: root } : {}) }));
  }

  /**
   * The model a request's `model` field names, held until `release` is called (so that an
   * unload waits for it); throws the 404 when none is served under that name.
   */
  hold(name: string | null | undefined): { model: ServedModel; release: () => void } {
    const e = name == null ? this.entries()[0] : this.byId.get(name);
    if (!e) {
      const known = [...this.byId.keys()];
      throw new ApiError(
        404,
        `The model \`${name ?? ''}\` does not exist. Served: ${known.join(', ') || 'none'}.`,
        'invalid_request_error',
        'model_not_found',
        'model',
      );
    }
    e.holders++;
    let released = false;
    return {
      model: e.model,
      release: () => {
        if (released) return;
        released = true;
        e.holders--;
        if (e.retired && e.holders === 0) void e.model.close();
      },
    };
  }

  /** Stops serving every adapter (server shutdown); the base models stay with their owner. */
  removeAdapters(): void {
    for (const id of [...this.byId.keys()]) if (!this.base.has(id)) this.remove(id);
  }

  private entries(): Entry[] {
    return [...this.byId.values()];
  }
}
