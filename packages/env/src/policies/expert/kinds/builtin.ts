// The built-in kinds of evidence, in the order decide.ts weighs them: resources confirm the others.
import './latency';
import './errors';
import './silence';
import './resources';
