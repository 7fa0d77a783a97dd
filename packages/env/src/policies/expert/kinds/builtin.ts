// The built-in kinds of evidence, in the order decide.ts weighs them (resources, which confirm, come last whatever the order).
import './latency';
import './errors';
import './silence';
import './resources';
