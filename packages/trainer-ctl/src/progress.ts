/**
 * Progress of a long loop on stderr. On a terminal one line is redrawn in place; in a log
 * (CI, redirected output) a plain line is written every `everyPct` percent or `everyMs`,
 * whichever comes first, so logs stay short but show the run is alive.
 */

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(chunk: string): boolean;
}

export interface ProgressOptions {
  total: number;
  label: string;
  stream?: ProgressStream;
  /** Non-TTY: write a line at least every this many percent. Default 10. */
  everyPct?: number;
  /** Non-TTY: and at most this long apart, ms. Default 30000. */
  everyMs?: number;
  /** Clock, ms (injectable so the line cadence is testable without waiting). */
  now?: () => number;
  /**
   * When the counted work began, on the `now` clock. Default: when the progress is created; a
   * loop that learns its total only from its first result passes the time before it.
   */
  startedAt?: number;
  /** Count already done before `startedAt` (a resumed run's earlier work): shown, but not in the rate. Default 0. */
  done?: number;
}

export interface Progress {
  /** Set the count done so far, with an optional short note (e.g. running figures). */
  update(done: number, note?: string): void;
  /** Final line; always written. */
  finish(note?: string): void;
}

const BAR = 24;

function fmtDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

export function createProgress(opts: ProgressOptions): Progress {
  const stream = opts.stream ?? process.stderr;
  const now = opts.now ?? Date.now;
  const tty = Boolean(stream.isTTY);
  const everyPct = opts.everyPct ?? 10;
  const everyMs = opts.everyMs ?? 30_000;
  const start = opts.startedAt ?? now();
  const before = opts.done ?? 0;
  let lastPct = -Infinity;
  let lastAt = start;
  let lastDrawAt = -Infinity;
  let done = before;

  const line = (note?: string): string => {
    const total = Math.max(opts.total, 0);
    const frac = total ? Math.min(done / total, 1) : 1;
    const elapsed = now() - start;
    const eta = done > before && done < total ? ` eta ${fmtDuration((elapsed / (done - before)) * (total - done))}` : '';
    const bar = tty ? `[${'#'.repeat(Math.round(frac * BAR)).padEnd(BAR, '.')}] ` : '';
    const text = `${opts.label} ${bar}${done}/${total} ${(100 * frac).toFixed(0)}% ${fmtDuration(elapsed)}${eta}${note ? ` ${note}` : ''}`;
    return tty && stream.columns ? text.slice(0, stream.columns - 1) : text;
  };

  return {
    update(n, note) {
      done = n;
      const t = now();
      if (tty) {
        // Redrawing more than ~10 times a second only costs time.
        if (t - lastDrawAt < 100 && n < opts.total) return;
        lastDrawAt = t;
        stream.write(`\r\x1b[K${line(note)}`);
        return;
      }
      const pct = opts.total ? (100 * n) / opts.total : 100;
      if (pct - lastPct >= everyPct || t - lastAt >= everyMs) {
        lastPct = pct;
        lastAt = t;
        stream.write(`${line(note)}\n`);
      }
    },
    finish(note) {
      stream.write(tty ? `\r\x1b[K${line(note)}\n` : `${line(note)}\n`);
    },
  };
}
