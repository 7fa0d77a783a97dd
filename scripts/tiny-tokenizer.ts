/**
 * Writes the tiny model's tokenizer (tokenizer.json + tokenizer_config.json with a chat template
 * that carries tools), fitted to an imported dataset's own vocabulary. Offline, a few seconds.
 *
 *   npx tsx scripts/tiny-tokenizer.ts <out-model-dir> <dataset-dir>
 */
import { writeTinyTokenizer } from '../packages/rollout/src/chat/tiny-tokenizer';

const [outDir, datasetDir] = process.argv.slice(2);
if (!outDir || !datasetDir) {
  console.error('usage: tsx scripts/tiny-tokenizer.ts <out-model-dir> <dataset-dir>');
  process.exit(2);
}
const r = await writeTinyTokenizer(outDir, datasetDir);
console.log(`wrote ${outDir}/tokenizer.json and tokenizer_config.json: ${r.vocabSize} tokens, eos ${r.eosTokenId}, pad ${r.padTokenId}`);
