/**
 * Prints the engine protocol's JSON Schema (packages/trainer-ctl/src/engine/protocol.ts), the file
 * the Python engine validates requests from:
 *   npx tsx scripts/engine-schema.ts > engine/thinkfl_engine/protocol.schema.json
 */
import { engineProtocolJsonSchema } from '../packages/trainer-ctl/src/engine/protocol';

process.stdout.write(`${JSON.stringify(engineProtocolJsonSchema(), null, 2)}\n`);
