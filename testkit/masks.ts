/** Contiguous runs of the ids where mask is 1: the model's turns of a tokenized episode. */
export function generatedRuns(ids: number[], mask: number[]): number[][] {
  const runs: number[][] = [];
  mask.forEach((m, i) => {
    if (m !== 1) return;
    if (i > 0 && mask[i - 1] === 1) runs[runs.length - 1].push(ids[i]);
    else runs.push([ids[i]]);
  });
  return runs;
}
