/** Per-question memory of reasoning paths already seen, for the diversity grader. */

export interface DiversityCache {
  /**
   * Records a path for a question; true when it had not been seen before. Each distinct
   * (question, path) is answered true exactly once, whoever asks.
   */
  markSeen(questionId: string, pathKey: string): Promise<boolean>;
  close(): Promise<void>;
}

/** In-process cache, for single-process runs and tests. */
export class MemoryDiversityCache implements DiversityCache {
  private readonly seen = new Map<string, Set<string>>();

  async markSeen(questionId: string, pathKey: string): Promise<boolean> {
    let paths = this.seen.get(questionId);
    if (!paths) {
      paths = new Set();
      this.seen.set(questionId, paths);
    }
    if (paths.has(pathKey)) return false;
    paths.add(pathKey);
    return true;
  }

  async close(): Promise<void> {
    this.seen.clear();
  }
}
