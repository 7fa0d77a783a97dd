/** Per-question memory of reasoning paths already seen, for the diversity grader. */

export interface DiversityCache {
  /**
   * Records a path for a question on behalf of `owner` (the sample that took it, e.g.
   * "<group>#<index>"); true when this owner is the first to record it. The first owner is
   * kept, so asking again as the same owner answers true again: a group graded a second time
   * (a step replayed after a kill) scores as it did the first time. Any other owner gets false.
   */
  markSeen(questionId: string, pathKey: string, owner: string): Promise<boolean>;
  close(): Promise<void>;
}

/** In-process cache, for single-process runs and tests. */
export class MemoryDiversityCache implements DiversityCache {
  /** question -> path -> first owner. */
  private readonly seen = new Map<string, Map<string, string>>();

  async markSeen(questionId: string, pathKey: string, owner: string): Promise<boolean> {
    let paths = this.seen.get(questionId);
    if (!paths) {
      paths = new Map();
      this.seen.set(questionId, paths);
    }
    if (!paths.has(pathKey)) paths.set(pathKey, owner);
    return paths.get(pathKey) === owner;
  }

  async close(): Promise<void> {
    this.seen.clear();
  }
}
