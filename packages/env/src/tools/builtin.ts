/** The built-in tools; each file registers itself. */
import './search-traces';
import './search-metrics';
import './search-logs';
import './print-results';
import './score';
