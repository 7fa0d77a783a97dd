// Preloaded by scripts/bench/cli-start.ts: the process's CPU time, all its threads (tsx's loader
// runs its hooks on one of its own), written on stderr at exit by the main thread only.
const { isMainThread } = require('node:worker_threads');

if (isMainThread) {
  process.on('exit', () => {
    const u = process.cpuUsage();
    process.stderr.write(`\ncpu-us ${u.user + u.system}\n`);
  });
}
