/** Imports the shared Nezha data once per test run (cached under .cache/) before any test. */
import { ensureNezhaDataset } from './nezha';

export default async function setup(): Promise<void> {
  await ensureNezhaDataset();
}
